//! The plugin's desktop commands driven with JSON as the webview sends it, and an `Entry`, on a
//! private Secret Service (scripts/test-rust: KEEPSAKE_TEST_ROOT is a throwaway directory).

use keepsake::plugin::RecoveryHintCommands;
use keepsake::{Error, Keepsake};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(std::env::var("KEEPSAKE_TEST_ROOT").expect("KEEPSAKE_TEST_ROOT (scripts/test-rust)"))
}

fn options(app: &str) -> String {
    format!(
        "{{\"deviceDirectory\": \"{}\", \"container\": \"{}\"}}",
        root().join("device").display(),
        root().join("containers").join(app).display()
    )
}

const WALLET: &str = "0x8a3f000000000000000000000000000000000001";

#[test]
fn hint_commands_as_the_webview_calls_them() {
    let app = "com.example.rust-hint";
    let commands = RecoveryHintCommands::open_with(app, Some(&options(app))).unwrap();
    assert_eq!(commands.get_recovery_hint(), "null");
    let set = commands.set_recovery_hint(&format!("{{\"lastWallet\":\"{WALLET}\"}}")).unwrap();
    assert!(set.contains(WALLET), "{set}");
    let merged = commands.set_recovery_hint("{\"lastAuthenticatorId\":\"passkey-7\"}").unwrap();
    assert!(merged.contains(WALLET) && merged.contains("passkey-7"), "merge on set: {merged}");
    assert!(commands.set_recovery_hint("{}").unwrap_err().contains("empty"), "an empty payload");
    assert!(commands.set_recovery_hint("not json").is_err());
    assert!(commands.set_recovery_hint("{\"lastWallet\":\"not an address\"}").is_err());
    assert!(commands.get_recovery_hint().contains("passkey-7"), "a refused set changes nothing");

    // The app uninstalled (its container gone) and installed again: welcome back.
    drop(commands);
    std::fs::remove_dir_all(root().join("containers").join(app)).ok();
    let again = RecoveryHintCommands::open_with(app, Some(&options(app))).unwrap();
    let back = again.get_recovery_hint();
    assert!(back.contains(WALLET) && back.contains("passkey-7"), "welcome back: {back}");
    again.clear_recovery_hint().unwrap();
    assert_eq!(again.get_recovery_hint(), "null");
}

#[test]
fn entries() {
    let app = "com.example.rust-entry";
    let keepsake = Keepsake::open(app, Some(&options(app))).unwrap();
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
    let app = "com.example.rust-threads";
    let keepsake = std::sync::Arc::new(Keepsake::open(app, Some(&options(app))).unwrap());
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
    let app = "com.example.rust-unlock";
    let keepsake = Keepsake::open(app, Some(&options(app))).unwrap();
    // No lock screen on this device: nothing to unlock, nothing to tell.
    assert_eq!(keepsake.unlock(b"1234"), Ok(None));
}

#[test]
fn one_answer_per_delete_and_a_set_that_stays_whole() {
    let app = "com.example.rust-deletes";
    let keepsake = std::sync::Arc::new(Keepsake::open(app, Some(&options(app))).unwrap());
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
