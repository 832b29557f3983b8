//! The recovery-hint plugin's desktop commands, with the plugin's semantics: JSON in and out as
//! the webview sends and reads it; `set` merges the fields given and refuses an empty payload;
//! `get` never rejects (no hint, or one that cannot be read, answers `{}` — never `null`: the
//! TypeScript facade's callers read `hint.lastAuthenticatorId` straight off the answer); `set`
//! resolves with no value and refuses `{}` with the seed's words; `clear` resolves.
//!
//! A Tauri app's desktop build registers them in three lines (Tauri itself cannot be fetched
//! where Keepsake is built, so this snippet is not compiled here):
//!
//! ```ignore
//! let hints = keepsake::plugin::RecoveryHintCommands::open("com.example.wallet")?;
//! tauri::Builder::default().manage(hints)
//!     .invoke_handler(tauri::generate_handler![get_recovery_hint, set_recovery_hint, clear_recovery_hint])
//! ```
//!
//! with each `#[tauri::command]` a one-line call of the method of the same name.

use crate::{Error, Keepsake};

/// The three commands over one app's hint.
pub struct RecoveryHintCommands {
    keepsake: Keepsake,
}

impl RecoveryHintCommands {
    pub fn open(app_id: &str) -> Result<RecoveryHintCommands, Error> {
        Self::open_with(app_id, None)
    }

    pub fn open_with(app_id: &str, options_json: Option<&str>) -> Result<RecoveryHintCommands, Error> {
        Ok(RecoveryHintCommands { keepsake: Keepsake::open(app_id, options_json)? })
    }

    /// `get_recovery_hint`: the hint's JSON object, or `{}`. Never rejects.
    pub fn get_recovery_hint(&self) -> String {
        self.keepsake.hint().unwrap_or_else(|| "{}".to_owned())
    }

    /// `set_recovery_hint(payload)`: merges the payload's fields into the hint and resolves with
    /// no value, as the seed's native sides; an empty payload rejects with "Refusing to persist
    /// an empty recovery hint", one that is not an object of the hint's fields with the reason.
    pub fn set_recovery_hint(&self, payload: &str) -> Result<(), String> {
        self.keepsake.set_hint(payload).map_err(|error| match error {
            crate::Error::Invalid(message) => message,
            other => other.to_string(),
        })
    }

    /// `clear_recovery_hint`: clears it.
    pub fn clear_recovery_hint(&self) -> Result<(), String> {
        self.keepsake.clear_hint().map_err(|error| error.to_string())
    }
}
