//! The plugin's desktop commands driven with JSON as the webview sends it, and an `Entry`, on a
//! private Secret Service (scripts/test-rust: KEEPSAKE_TEST_ROOT is a throwaway directory).

use keepsake::plugin::RecoveryHintCommands;
use keepsake::{Error, Keepsake};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The test's own private Secret Service, never the user's: `scripts/test-rust` starts one and
/// names its directory (KEEPSAKE_TEST_ROOT); a plain `cargo test` starts one here, once — a
/// session bus and gnome-keyring under a throwaway directory (`scripts/headless-session`),
/// stopped and removed when the test process ends. None (each test then says why it is
/// skipped) where dbus-daemon or gnome-keyring is not installed.
fn root() -> Option<PathBuf> {
    static ROOT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match ROOT.get_or_init(start_private_session) {
        Ok(root) => Some(root.clone()),
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

fn start_private_session() -> Result<PathBuf, String> {
    if let Ok(root) = std::env::var("KEEPSAKE_TEST_ROOT") {
        return Ok(PathBuf::from(root));
    }
    for tool in ["dbus-daemon", "gnome-keyring-daemon", "gdbus"] {
        let found = Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output();
        if !found.map(|o| o.status.success()).unwrap_or(false) {
            return Err(format!(
                "{tool} is not installed: a private Secret Service cannot be started \
                 (apt-get install dbus-daemon gnome-keyring libglib2.0-bin)"
            ));
        }
    }
    let base = std::env::temp_dir().join(format!("keepsake-cargo-test.{}", std::process::id()));
    let (run, data, root) = (base.join("run"), base.join("data"), base.join("root"));
    for directory in [&run, &data, &root] {
        std::fs::create_dir_all(directory).map_err(|e| e.to_string())?;
        std::fs::set_permissions(directory, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| e.to_string())?;
    }
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| e.to_string())?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/headless-session");
    let pids = base.join("pids");
    let mut started = Command::new(&script)
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env("HOME", &base)
        .env("XDG_RUNTIME_DIR", &run)
        .env("XDG_DATA_HOME", &data)
        .env("KEEPSAKE_HEADLESS_PIDS", &pids)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    let password = format!("cargo-test-{}-{:?}", std::process::id(), std::time::SystemTime::now());
    started.stdin.take().unwrap().write_all(password.as_bytes()).map_err(|e| e.to_string())?;
    if !started.wait().map_err(|e| e.to_string())?.success() {
        return Err("the private Secret Service did not start (scripts/headless-session)".into());
    }
    // When this process ends, its daemons stop and its directory goes.
    Command::new("setsid")
        .arg("sh")
        .arg("-c")
        .arg(
            "while kill -0 \"$1\" 2>/dev/null; do sleep 1; done; \
             awk '{print $2}' \"$2/pids\" | xargs -r kill 2>/dev/null; rm -rf \"$2\"",
        )
        .arg("reaper")
        .arg(std::process::id().to_string())
        .arg(&base)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    // Before any test calls the library (they all wait on this once): the library and
    // libsecret look for the bus here.
    std::env::set_var("DBUS_SESSION_BUS_ADDRESS", format!("unix:path={}", run.join("bus").display()));
    std::env::set_var("XDG_RUNTIME_DIR", &run);
    std::env::set_var("XDG_DATA_HOME", &data);
    Ok(root)
}

fn options(root: &std::path::Path, app: &str) -> String {
    format!(
        "{{\"deviceDirectory\": \"{}\", \"container\": \"{}\"}}",
        root.join("device").display(),
        root.join("containers").join(app).display()
    )
}

const WALLET: &str = "0x8a3f000000000000000000000000000000000001";

#[test]
fn hint_commands_as_the_webview_calls_them() {
    let Some(root) = root() else { return };
    let app = "com.example.rust-hint";
    let commands = RecoveryHintCommands::open_with(app, Some(&options(&root, app))).unwrap();
    // The seed's answer on an empty store: `{}`, off which the facade reads
    // `hint.lastAuthenticatorId` (undefined, never a throw on `null`).
    let empty = commands.get_recovery_hint();
    assert_eq!(empty, "{}");
    assert_eq!(facade_read(&empty, "lastAuthenticatorId"), None);
    assert_eq!(commands.set_recovery_hint(&format!("{{\"lastWallet\":\"{WALLET}\"}}")), Ok(()));
    assert!(commands.get_recovery_hint().contains(WALLET));
    commands.set_recovery_hint("{\"lastAuthenticatorId\":\"passkey-7\"}").unwrap();
    let merged = commands.get_recovery_hint();
    assert!(merged.contains(WALLET) && merged.contains("passkey-7"), "merge on set: {merged}");
    assert_eq!(facade_read(&merged, "lastAuthenticatorId").as_deref(), Some("passkey-7"));
    assert_eq!(
        commands.set_recovery_hint("{}"),
        Err("Refusing to persist an empty recovery hint".to_owned()),
        "an empty payload, in the seed's words"
    );
    assert!(commands.set_recovery_hint("not json").is_err());
    assert!(commands.set_recovery_hint("{\"lastWallet\":\"not an address\"}").is_err());
    assert!(commands.get_recovery_hint().contains("passkey-7"), "a refused set changes nothing");

    // The app uninstalled (its container gone) and installed again: welcome back.
    drop(commands);
    std::fs::remove_dir_all(root.join("containers").join(app)).ok();
    let again = RecoveryHintCommands::open_with(app, Some(&options(&root, app))).unwrap();
    let back = again.get_recovery_hint();
    assert!(back.contains(WALLET) && back.contains("passkey-7"), "welcome back: {back}");
    assert_eq!(again.clear_recovery_hint(), Ok(()));
    assert_eq!(again.get_recovery_hint(), "{}");
}

/// What the TypeScript facade does with `get`'s answer: `JSON.parse(answer).field` — a string
/// field's value, None for undefined; a panic where JavaScript would throw (`null.field`).
fn facade_read(answer: &str, field: &str) -> Option<String> {
    assert!(answer.trim_start().starts_with('{'), "JSON.parse({answer}).{field} would throw");
    let key = format!("\"{field}\":\"");
    let start = answer.find(&key)? + key.len();
    Some(answer[start..].split('"').next()?.to_owned())
}

#[test]
fn entries() {
    let Some(root) = root() else { return };
    let app = "com.example.rust-entry";
    let keepsake = Keepsake::open(app, Some(&options(&root, app))).unwrap();
    let entry = keepsake.entry("rust-service", "alice");
    assert_eq!(entry.get_password(), Err(Error::NoEntry));
    entry.set_password("pässwörd ✓").unwrap();
    assert_eq!(entry.get_password().unwrap(), "pässwörd ✓");
    entry.set_password("second").unwrap();
    assert_eq!(entry.get_password().unwrap(), "second");
    entry.set_secret(&[0, 255, 7]).unwrap();
    assert_eq!(entry.get_secret().unwrap(), vec![0, 255, 7]);
    assert!(matches!(entry.get_password(), Err(Error::Invalid(_))));
    entry.delete_credential().unwrap();
    assert_eq!(entry.delete_credential(), Err(Error::NoEntry));
    assert!(matches!(keepsake.entry("a\0b", "x").get_password(), Err(Error::Invalid(_))));
}

#[test]
fn many_threads_at_once() {
    let Some(root) = root() else { return };
    let app = "com.example.rust-threads";
    let keepsake = std::sync::Arc::new(Keepsake::open(app, Some(&options(&root, app))).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|index| {
            let keepsake = keepsake.clone();
            std::thread::spawn(move || {
                for round in 0..5 {
                    let entry = keepsake.entry("rust-threads", &format!("{index}-{round}"));
                    entry.set_password("x").unwrap();
                    assert_eq!(entry.get_password().unwrap(), "x");
                    entry.delete_credential().unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}

#[test]
fn unlock_passes_on_the_notice() {
    let Some(root) = root() else { return };
    let app = "com.example.rust-unlock";
    let keepsake = Keepsake::open(app, Some(&options(&root, app))).unwrap();
    // No lock screen on this device: nothing to unlock, nothing to tell.
    assert_eq!(keepsake.unlock(b"1234"), Ok(None));
}

#[test]
fn one_answer_per_delete_and_a_set_that_stays_whole() {
    let Some(root) = root() else { return };
    let app = "com.example.rust-deletes";
    let keepsake = std::sync::Arc::new(Keepsake::open(app, Some(&options(&root, app))).unwrap());
    for round in 0..3 {
        let account = format!("race-{round}");
        keepsake.entry("rust-deletes", &account).set_password("x").unwrap();
        let outcomes: Vec<_> = (0..8)
            .map(|_| {
                let keepsake = keepsake.clone();
                let account = account.clone();
                std::thread::spawn(move || keepsake.entry("rust-deletes", &account).delete_credential())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|thread| thread.join().unwrap())
            .collect();
        assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 1, "{outcomes:?}");
        assert!(outcomes.iter().filter(|o| o.is_err()).all(|o| *o == Err(Error::NoEntry)));
    }
    // Sets while another thread deletes: every set succeeds.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let deleter = {
        let (keepsake, stop) = (keepsake.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = keepsake.entry("rust-deletes", "set-race").delete_credential();
            }
        })
    };
    for round in 0..30 {
        keepsake.entry("rust-deletes", "set-race").set_password(&format!("v{round}")).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    deleter.join().unwrap();
    // A password read back shows its length only when printed by mistake.
    let entry = keepsake.entry("rust-deletes", "debug");
    entry.set_password("never-printed-7c1").unwrap();
    let printed = format!("{:?}", entry.get_password().unwrap());
    assert!(!printed.contains("never-printed"), "{printed}");
    entry.delete_credential().unwrap();
}
