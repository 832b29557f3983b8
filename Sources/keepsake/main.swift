import KeepsakeTestSupport
import Foundation
print("starting")
let s = try PrivateSecretService.start()
print("started", s.busAddress)
print(try s.connection().search(["a": "b"]))
