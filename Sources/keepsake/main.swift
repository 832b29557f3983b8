import Foundation
import KeepsakeCLI

// The shipped command line: the product alone, at the real device's cost and delays.
exit(KeepsakeCLI.main())
