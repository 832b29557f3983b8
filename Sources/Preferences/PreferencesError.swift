/// The one error type of the Preferences module: what went wrong, in words (never a value).
public struct PreferencesError: Error, CustomStringConvertible, Sendable, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
