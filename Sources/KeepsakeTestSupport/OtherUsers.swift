import Escrow
import Foundation
import Sealing

/// Other local users at a guess counter's socket, as the tests and the benchmark need them: each
/// a process of its own uid (`setpriv`, or a forked child that dropped to the uid), so the
/// service tells them apart by `SO_PEERCRED` exactly as it would real users. Needs root.
package enum OtherUsers {
    /// Registers one slot for each of `count` uids from `firstUID` on (a blinded element and a
    /// registration's fields of the right shapes: the service checks shapes, not meaning).
    /// Returns how many registrations went through.
    package static func registerSlots(socket: String, count: Int, firstUID: UInt32 = 70_000)
        throws -> Int
    {
        let blinded = OPRF.blind(SecureBytes(randomCount: 32), context: "keepsake-escrow v1")
            .blinded
        var register = TLV(magic: EscrowProtocol.magic)
        register.append(2, blinded)  // EscrowProtocol.Tag.blinded
        var finish = TLV(magic: Data())
        finish.append(5, Data(repeating: 1, count: 32))  // verifier
        finish.append(6, Data(repeating: 2, count: 32))  // owner
        finish.append(7, Data(repeating: 3, count: 64))  // envelope
        finish.append(15, Data(repeating: 4, count: KeyDerivation.saltLength))  // salt
        for (tag, value) in [(16, Int64(1)), (17, Int64(8192)), (8, Int64(10))] {
            finish.append(UInt8(tag), withUnsafeBytes(of: value.bigEndian) { Data($0) })
        }
        let script = """
            import os, socket, sys
            path, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
            register, rest = bytes.fromhex(sys.argv[4]), bytes.fromhex(sys.argv[5])
            def post(target, body):
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(10)
                s.connect(path)
                s.sendall(b"POST " + target + b" HTTP/1.1\\r\\nContent-Length: %d\\r\\n\\r\\n" % len(body) + body)
                answer = b""
                while True:
                    chunk = s.recv(4096)
                    if not chunk: break
                    answer += chunk
                s.close()
                head, _, body = answer.partition(b"\\r\\n\\r\\n")
                return head.split(b" ")[1], body
            done = 0
            for uid in range(first, first + count):
                child = os.fork()
                if child == 0:
                    os.setgroups([]); os.setresgid(uid, uid, uid); os.setresuid(uid, uid, uid)
                    status, body = post(b"/v1/register", register)
                    ok = status == b"200" and body[4] == 1
                    if ok:
                        slot = body[9:25]
                        status, _ = post(b"/v1/register/finish", b"KEP1\\x01\\x00\\x00\\x00\\x10" + slot + rest)
                        ok = status == b"200"
                    os._exit(0 if ok else 1)
                _, code = os.waitpid(child, 0)
                done += code == 0
            print(done)
            """
        let result = try Spawn.capture(
            "/usr/bin/python3",
            [
                "-c", script, socket, String(firstUID), String(count), register.bytes.hexString,
                finish.bytes.hexString,
            ], environment: [:])
        let printed = String(decoding: result.stdout, as: UTF8.self)
        guard result.status == 0,
            let done = Int(printed.trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            throw HarnessError(
                "registering other users' slots failed: \(String(decoding: result.stderr, as: UTF8.self))"
            )
        }
        return done
    }

    /// Ends a flood (`flood`): SIGKILL, as the process may have inherited a mask that blocks
    /// SIGTERM from the thread that started it; waited for, so nothing of it is left.
    package static func stop(_ flood: Process) {
        if flood.isRunning { kill(flood.processIdentifier, SIGKILL) }
        flood.waitUntilExit()
    }

    /// Starts a flood of the socket by `uid` for `seconds`: 40 connections held half-open
    /// (reopened every half second) and requests in a loop on 4 threads. Returns once it runs;
    /// the caller ends it (`stop`).
    package static func flood(socket: String, uid: UInt32 = 64_125, seconds: Int = 20) throws
        -> Process
    {
        let script = """
            import socket, sys, threading, time
            path, end = sys.argv[1], time.time() + float(sys.argv[2])
            def connect(head):
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(2)
                s.connect(path)
                s.sendall(head)
                return s
            def half_open():
                while time.time() < end:
                    held = []
                    for _ in range(40):
                        try: held.append(connect(b"POST /v1/register HTTP/1.1\\r\\n"))
                        except OSError: pass
                    time.sleep(0.5)
                    for s in held: s.close()
            def requests():
                while time.time() < end:
                    try:
                        s = connect(b"POST /v1/register HTTP/1.1\\r\\nContent-Length: 0\\r\\n\\r\\n")
                        s.recv(4096)
                        s.close()
                    except OSError: pass
            threads = [threading.Thread(target=half_open)] + [threading.Thread(target=requests) for _ in range(4)]
            for t in threads: t.start()
            print("flooding", flush=True)
            for t in threads: t.join()
            """
        let flood = Process()
        flood.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        flood.arguments = [
            "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", "-c", script,
            socket, String(seconds),
        ]
        let output = Pipe()
        flood.standardOutput = output
        try flood.run()
        // Started once its first line came (its threads run from there).
        _ = output.fileHandleForReading.availableData
        usleep(300_000)
        return flood
    }
}
