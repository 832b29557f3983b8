import Foundation

/// `keepsake app uninstall`: the container is deleted, nothing else.
enum AppCommand {
    static func run(_ verb: String?, _ context: Context) throws {
        try context.arguments.allowOnly([])
        guard verb == "uninstall" else { throw CommandError.usage("app uninstall") }
        try context.device.uninstall(context.app)
    }
}
