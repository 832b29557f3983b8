//! Keepsake from Rust, over `libKeepsakeC.so` (`include/keepsake.h`, docs/c-abi.md): passwords
//! sealed by Keepsake ([`Entry`], as the `keyring` crate's), the recovery hint, and the
//! recovery-hint plugin's desktop commands ([`plugin`]).

use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::fmt;
use std::ptr;

pub mod plugin;
mod secret;

pub use secret::{Secret, SecretString};

mod ffi {
    use std::os::raw::c_char;
    #[repr(C)]
    pub struct App {
        _private: [u8; 0],
    }
    extern "C" {
        pub fn keepsake_abi_version() -> u32;
        pub fn keepsake_app_open(
            app_id: *const c_char, options: *const c_char, out: *mut *mut App, error: *mut *mut c_char,
        ) -> i32;
        pub fn keepsake_app_close(app: *mut App) -> i32;
        pub fn keepsake_string_free(text: *mut c_char);
        pub fn keepsake_secret_free(bytes: *mut u8, length: usize);
        pub fn keepsake_password_add(
            app: *mut App, service: *const c_char, account: *const c_char, secret: *const u8,
            length: usize, accessible: *const c_char, synchronizable: i32, error: *mut *mut c_char,
        ) -> i32;
        pub fn keepsake_password_get(
            app: *mut App, service: *const c_char, account: *const c_char, synchronizable: i32,
            secret: *mut *mut u8, length: *mut usize, error: *mut *mut c_char,
        ) -> i32;
        pub fn keepsake_password_update(
            app: *mut App, service: *const c_char, account: *const c_char, synchronizable: i32,
            secret: *const u8, length: usize, error: *mut *mut c_char,
        ) -> i32;
        pub fn keepsake_password_delete(
            app: *mut App, service: *const c_char, account: *const c_char, synchronizable: i32,
            error: *mut *mut c_char,
        ) -> i32;
        pub fn keepsake_hint_get(app: *mut App) -> *mut c_char;
        pub fn keepsake_hint_set(app: *mut App, json: *const c_char, error: *mut *mut c_char) -> i32;
        pub fn keepsake_hint_clear(app: *mut App, error: *mut *mut c_char) -> i32;
        pub fn keepsake_lockscreen_unlock(
            app: *mut App, passcode: *const u8, length: usize, notice: *mut *mut c_char,
            error: *mut *mut c_char,
        ) -> i32;
    }
}

/// The ABI version this crate was written against.
pub const ABI_VERSION: u32 = 1;
const ITEM_NOT_FOUND: i32 = -25300;
const DUPLICATE_ITEM: i32 = -25299;
const PARAM: i32 = -50;
const AUTH_FAILED: i32 = -25293;
const INTERACTION_NOT_ALLOWED: i32 = -25308;

/// What a call can fail with: Keepsake's status (an `OSStatus`-style code) sorted into what a
/// caller does about it, with the library's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// No such item (`errSecItemNotFound`).
    NoEntry,
    /// Bad input: a NUL inside a string, a payload refused (`errSecParam`).
    Invalid(String),
    /// The device is locked, or the passcode was wrong (`errSecInteractionNotAllowed`,
    /// `errSecAuthFailed`).
    Locked(String),
    /// Any other failure: its status and message.
    Failed { status: i32, message: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoEntry => write!(f, "no such entry"),
            Error::Invalid(message) => write!(f, "invalid: {message}"),
            Error::Locked(message) => write!(f, "locked: {message}"),
            Error::Failed { status, message } => write!(f, "{message} (status {status})"),
        }
    }
}

impl std::error::Error for Error {}

fn text(value: &str) -> Result<CString, Error> {
    CString::new(value).map_err(|_| Error::Invalid("a string with a NUL byte".into()))
}

/// Takes a string the library returned (and frees it).
unsafe fn take(pointer: *mut c_char) -> Option<String> {
    if pointer.is_null() {
        return None;
    }
    let value = CStr::from_ptr(pointer).to_string_lossy().into_owned();
    ffi::keepsake_string_free(pointer);
    Some(value)
}

fn check(status: i32, error: *mut c_char) -> Result<(), Error> {
    let message = unsafe { take(error) }.unwrap_or_default();
    match status {
        0 => Ok(()),
        ITEM_NOT_FOUND => Err(Error::NoEntry),
        PARAM => Err(Error::Invalid(message)),
        AUTH_FAILED | INTERACTION_NOT_ALLOWED => Err(Error::Locked(message)),
        status => Err(Error::Failed { status, message }),
    }
}

/// An app on this user's device (a `keepsake_app` handle), closed when dropped. `Send + Sync`:
/// the library takes calls from any thread at once.
pub struct Keepsake {
    app: *mut ffi::App,
}

unsafe impl Send for Keepsake {}
unsafe impl Sync for Keepsake {}

impl Keepsake {
    /// Opens `app_id`; `options_json`: `{"deviceDirectory": …, "cloud": …, …}` or None.
    pub fn open(app_id: &str, options_json: Option<&str>) -> Result<Keepsake, Error> {
        if unsafe { ffi::keepsake_abi_version() } != ABI_VERSION {
            return Err(Error::Failed { status: -4, message: "another ABI version".into() });
        }
        let id = text(app_id)?;
        let options = options_json.map(text).transpose()?;
        let mut app = ptr::null_mut();
        let mut error = ptr::null_mut();
        let status = unsafe {
            ffi::keepsake_app_open(
                id.as_ptr(), options.as_ref().map_or(ptr::null(), |o| o.as_ptr()), &mut app,
                &mut error,
            )
        };
        check(status, error)?;
        Ok(Keepsake { app })
    }

    /// The recovery hint as JSON, or `None` when there is none (never fails).
    pub fn hint(&self) -> Option<String> {
        let json = unsafe { take(ffi::keepsake_hint_get(self.app)) }?;
        if json == "{}" || json == "null" { None } else { Some(json) }
    }

    /// Merges the fields `json` gives into the hint; an empty payload is refused.
    pub fn set_hint(&self, json: &str) -> Result<(), Error> {
        let payload = text(json)?;
        let mut error = ptr::null_mut();
        let status = unsafe { ffi::keepsake_hint_set(self.app, payload.as_ptr(), &mut error) };
        check(status, error)
    }

    /// Clears the hint.
    pub fn clear_hint(&self) -> Result<(), Error> {
        let mut error = ptr::null_mut();
        let status = unsafe { ffi::keepsake_hint_clear(self.app, &mut error) };
        check(status, error)
    }

    /// Unlocks the device with the passcode's bytes. `Ok(Some(notice))`: what to tell the owner
    /// of wrong passcodes since the last unlock (and of wrong claims at the account's escrow), one
    /// line each — the tries it reports come back as it is returned, so show it. `Ok(None)`:
    /// nothing to tell (or no lock screen). A wrong passcode is `Error::Locked`, counted.
    pub fn unlock(&self, passcode: &[u8]) -> Result<Option<String>, Error> {
        // Empty means no passcode at all, which the library tells apart from a NULL pointer
        // only by the length: an empty slice's pointer is dangling but never read.
        let mut notice = ptr::null_mut();
        let mut error = ptr::null_mut();
        let status = unsafe {
            ffi::keepsake_lockscreen_unlock(
                self.app, passcode.as_ptr(), passcode.len(), &mut notice, &mut error,
            )
        };
        let told = unsafe { take(notice) };
        check(status, error)?;
        Ok(told)
    }

    /// The password entry of `service` and `account`.
    pub fn entry<'a>(&'a self, service: &str, account: &str) -> Entry<'a> {
        Entry { keepsake: self, service: service.to_owned(), account: account.to_owned() }
    }
}

impl Drop for Keepsake {
    fn drop(&mut self) {
        unsafe { ffi::keepsake_app_close(self.app) };
    }
}

/// One password, as the `keyring` crate's `Entry`: a generic password of Keepsake's Keychain,
/// this device only, readable after the first unlock.
pub struct Entry<'a> {
    keepsake: &'a Keepsake,
    service: String,
    account: String,
}

impl Entry<'_> {
    pub fn set_password(&self, password: &str) -> Result<(), Error> {
        self.set_secret(password.as_bytes())
    }

    /// The password, in memory that is wiped when it is dropped. A secret that is not UTF-8 is
    /// `Error::Invalid`, and is wiped too.
    pub fn get_password(&self) -> Result<SecretString, Error> {
        SecretString::from_secret(self.get_secret()?)
            .map_err(|_| Error::Invalid("the secret is not UTF-8".into()))
    }

    /// Adds or replaces the secret: atomic from the caller's view (a delete landing between the
    /// add and the update is answered by adding again).
    pub fn set_secret(&self, secret: &[u8]) -> Result<(), Error> {
        let (service, account) = (text(&self.service)?, text(&self.account)?);
        let class = text("after-first-unlock-this-device-only")?;
        for _ in 0..8 {
            let mut error = ptr::null_mut();
            let status = unsafe {
                ffi::keepsake_password_add(
                    self.keepsake.app, service.as_ptr(), account.as_ptr(), secret.as_ptr(),
                    secret.len(), class.as_ptr(), 0, &mut error,
                )
            };
            if status != DUPLICATE_ITEM {
                return check(status, error);
            }
            unsafe { take(error) };
            let mut error = ptr::null_mut();
            let status = unsafe {
                ffi::keepsake_password_update(
                    self.keepsake.app, service.as_ptr(), account.as_ptr(), 0, secret.as_ptr(),
                    secret.len(), &mut error,
                )
            };
            if status != ITEM_NOT_FOUND {
                return check(status, error);
            }
            unsafe { take(error) };  // deleted between the two: add again
        }
        Err(Error::Failed { status: DUPLICATE_ITEM, message: "the item kept changing".into() })
    }

    /// The secret, in memory that is wiped when it is dropped (the library's copy is wiped and
    /// freed before this returns).
    pub fn get_secret(&self) -> Result<Secret, Error> {
        let (service, account) = (text(&self.service)?, text(&self.account)?);
        let mut bytes = ptr::null_mut();
        let mut length = 0usize;
        let mut error = ptr::null_mut();
        let status = unsafe {
            ffi::keepsake_password_get(
                self.keepsake.app, service.as_ptr(), account.as_ptr(), 0, &mut bytes, &mut length,
                &mut error,
            )
        };
        check(status, error)?;
        let secret = Secret::copy_from(unsafe { std::slice::from_raw_parts(bytes, length) });
        unsafe { ffi::keepsake_secret_free(bytes, length) };
        Ok(secret)
    }

    /// Deletes the entry: `Error::NoEntry` when there was none (or a concurrent delete removed
    /// it first), as the keyring crate answers.
    pub fn delete_credential(&self) -> Result<(), Error> {
        let (service, account) = (text(&self.service)?, text(&self.account)?);
        let mut error = ptr::null_mut();
        let status = unsafe {
            ffi::keepsake_password_delete(
                self.keepsake.app, service.as_ptr(), account.as_ptr(), 0, &mut error,
            )
        };
        check(status, error)
    }
}
