"""Python's keyring, kept by Keepsake: each password a generic password of Keepsake's Keychain
(service = keyring's service name, account = its username), sealed under the device's class keys
before it reaches the Secret Service, through libKeepsakeC.so (include/keepsake.h).

Install: `pip install keyring_keepsake-….whl` — the wheel carries the library, with Swift's
standard library linked in, so no Swift toolchain is needed (scripts/build-wheel makes it;
docs/python.md). The library is looked for in KEEPSAKE_LIBRARY (a path), then beside this file
(the wheel's), then on the system's library path (the libkeepsake package). keyring then picks
this backend (its priority is above the Secret Service backend's). The app the passwords belong
to: KEEPSAKE_KEYRING_APP, else `org.python.keyring`.
"""

import ctypes
import ctypes.util
import os
import threading

from keyring import errors
from keyring.backend import KeyringBackend

try:  # keyring >= 23.? moved it
    from jaraco.classes.properties import classproperty
except ImportError:  # pragma: no cover
    from keyring.compat.properties import classproperty  # type: ignore

ABI_VERSION = 1
ITEM_NOT_FOUND = -25300
DUPLICATE_ITEM = -25299


class KeepsakeError(errors.KeyringError):
    """A failure the library reported: its OSStatus-style code and message."""

    def __init__(self, status, message):
        super().__init__(f"{message} (status {status})")
        self.status = status


def _load():
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libKeepsakeC.so")
    path = (os.environ.get("KEEPSAKE_LIBRARY")
            or (bundled if os.path.exists(bundled) else None)
            or ctypes.util.find_library("KeepsakeC"))
    library = ctypes.CDLL(path or "libKeepsakeC.so")
    c_char_pp = ctypes.POINTER(ctypes.c_char_p)
    byte_pp = ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8))
    size_p = ctypes.POINTER(ctypes.c_size_t)
    handle = ctypes.c_void_p
    signatures = {
        "keepsake_abi_version": ([], ctypes.c_uint32),
        "keepsake_app_open": (
            [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(handle), ctypes.POINTER(ctypes.c_void_p)],
            ctypes.c_int32,
        ),
        "keepsake_app_close": ([handle], ctypes.c_int32),
        "keepsake_string_free": ([ctypes.c_void_p], None),
        "keepsake_secret_free": ([ctypes.c_void_p, ctypes.c_size_t], None),
        "keepsake_password_add": (
            [handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t,
             ctypes.c_char_p, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)],
            ctypes.c_int32,
        ),
        "keepsake_password_get": (
            [handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32, byte_pp, size_p,
             ctypes.POINTER(ctypes.c_void_p)],
            ctypes.c_int32,
        ),
        "keepsake_password_update": (
            [handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_void_p,
             ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)],
            ctypes.c_int32,
        ),
        "keepsake_password_delete": (
            [handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32,
             ctypes.POINTER(ctypes.c_void_p)],
            ctypes.c_int32,
        ),
        "keepsake_lockscreen_unlock": (
            [handle, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
             ctypes.POINTER(ctypes.c_void_p)],
            ctypes.c_int32,
        ),
    }
    del c_char_pp
    for name, (arguments, result) in signatures.items():
        function = getattr(library, name)
        function.argtypes = arguments
        function.restype = result
    if library.keepsake_abi_version() != ABI_VERSION:
        raise RuntimeError("libKeepsakeC.so speaks another ABI version")
    return library


class _Library:
    """The loaded library and one open app handle, made at first use (once, whichever thread
    comes first: the others wait for it)."""

    library = None
    app = None
    lock = threading.Lock()

    @classmethod
    def get(cls):
        with cls.lock:
            if cls.library is None:
                cls.library = _load()
            if cls.app is None:
                app = ctypes.c_void_p()
                error = ctypes.c_void_p()
                app_id = os.environ.get("KEEPSAKE_KEYRING_APP", "org.python.keyring")
                status = cls.library.keepsake_app_open(
                    _text(app_id, "KEEPSAKE_KEYRING_APP"), None, ctypes.byref(app),
                    ctypes.byref(error))
                cls.check(status, error)
                cls.app = app
            return cls.library, cls.app

    @classmethod
    def check(cls, status, error):
        if status == 0:
            return
        message = "keepsake failed"
        if error.value:
            message = ctypes.string_at(error.value).decode("utf-8", "replace")
            cls.library.keepsake_string_free(error)
        raise KeepsakeError(status, message)

    @classmethod
    def discard(cls, error):
        if error.value:
            cls.library.keepsake_string_free(error)


def _text(value, name):
    """A name for C: UTF-8, and no NUL (C would cut the name there: another item's name)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str")
    if "\0" in value:
        raise ValueError(f"{name} contains a NUL character, which a C string cannot carry")
    encoded = None
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError:
        pass
    if encoded is None:  # raised here, outside the handler: no exception holds the value
        raise ValueError(f"{name} is not valid Unicode text (a lone surrogate)")
    return encoded


class _Secret:
    """A secret's UTF-8 bytes in a buffer this module wipes when done (`with`), never an
    immutable `bytes` that stays in memory; errors never hold the text."""

    def __init__(self, text, name):
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str")
        buffer = None
        try:
            buffer = bytearray(text, "utf-8")
        except UnicodeEncodeError:
            pass
        if buffer is None:
            raise ValueError(f"{name} is not valid Unicode text (a lone surrogate)")
        self.buffer = buffer
        self.length = len(buffer)
        self.array = (ctypes.c_char * max(self.length, 1)).from_buffer(
            self.buffer if self.length else bytearray(1))

    def __enter__(self):
        return self

    def __exit__(self, *_):
        ctypes.memset(ctypes.addressof(self.array), 0, self.length)
        del self.array

    @property
    def pointer(self):
        return ctypes.addressof(self.array)


def _read_secret(library, secret, length):
    """The library's secret as text: copied into a buffer that is wiped, the library's copy
    wiped and freed; a secret that is not UTF-8 raises an error that does not hold it."""
    buffer = bytearray(length.value)
    try:
        if length.value:
            ctypes.memmove((ctypes.c_char * length.value).from_buffer(buffer), secret, length.value)
        text = None
        try:
            text = buffer.decode("utf-8")
        except UnicodeDecodeError:
            pass
        if text is None:
            raise KeepsakeError(-26275, "the stored secret is not UTF-8 text")  # errSecDecode
        return text
    finally:
        for index in range(len(buffer)):
            buffer[index] = 0
        library.keepsake_secret_free(secret, length)


class KeepsakeKeyring(KeyringBackend):
    """keyring's backend over Keepsake's Keychain (generic passwords)."""

    @classproperty
    def priority(cls):  # noqa: N805 (keyring's class property)
        try:
            _Library.get()
        except Exception as error:  # not viable here: keyring skips this backend
            raise RuntimeError(f"Keepsake is not available: {error}") from error
        return 9

    def get_password(self, service, username):
        library, app = _Library.get()
        service, username = _text(service, "service"), _text(username, "username")
        secret = ctypes.POINTER(ctypes.c_uint8)()
        length = ctypes.c_size_t()
        error = ctypes.c_void_p()
        status = library.keepsake_password_get(
            app, service, username, 0, ctypes.byref(secret), ctypes.byref(length),
            ctypes.byref(error))
        if status == ITEM_NOT_FOUND:
            _Library.discard(error)
            return None
        _Library.check(status, error)
        return _read_secret(library, secret, length)

    def set_password(self, service, username, password):
        """Adds, or replaces, the password: atomic from the caller's view — a delete landing
        between the add and the update is answered by adding again."""
        library, app = _Library.get()
        service, username = _text(service, "service"), _text(username, "username")
        with _Secret(password, "password") as data:
            for _ in range(8):
                error = ctypes.c_void_p()
                status = library.keepsake_password_add(
                    app, service, username, data.pointer, data.length,
                    b"after-first-unlock-this-device-only", 0, ctypes.byref(error))
                if status != DUPLICATE_ITEM:
                    break
                _Library.discard(error)
                error = ctypes.c_void_p()
                status = library.keepsake_password_update(
                    app, service, username, 0, data.pointer, data.length, ctypes.byref(error))
                if status != ITEM_NOT_FOUND:
                    break
                _Library.discard(error)  # deleted between the two: add again
            try:
                _Library.check(status, error)
            except KeepsakeError as failure:
                raise errors.PasswordSetError(str(failure)) from failure

    def delete_password(self, service, username):
        library, app = _Library.get()
        service, username = _text(service, "service"), _text(username, "username")
        error = ctypes.c_void_p()
        status = library.keepsake_password_delete(app, service, username, 0, ctypes.byref(error))
        if status == ITEM_NOT_FOUND:
            _Library.discard(error)
            raise errors.PasswordDeleteError("no such password")
        try:
            _Library.check(status, error)
        except KeepsakeError as failure:
            raise errors.PasswordDeleteError(str(failure)) from failure


def unlock(passcode):
    """Unlocks the device with the passcode (bytes). Returns what to tell the owner of wrong
    passcodes since the last unlock (and of wrong claims at the account's escrow), one line each,
    or None: the tries it reports come back as it is returned, so show it. A wrong passcode
    raises KeepsakeError (status -25293), counted."""
    if not isinstance(passcode, (bytes, bytearray)):
        raise TypeError("passcode must be bytes")
    library, app = _Library.get()
    notice = ctypes.c_void_p()
    error = ctypes.c_void_p()
    buffer = bytearray(passcode)
    try:
        array = (ctypes.c_char * max(len(buffer), 1)).from_buffer(buffer if buffer else bytearray(1))
        status = library.keepsake_lockscreen_unlock(
            app, ctypes.addressof(array), len(buffer), ctypes.byref(notice), ctypes.byref(error))
        del array
    finally:
        for index in range(len(buffer)):
            buffer[index] = 0
    told = None
    if notice.value:
        told = ctypes.string_at(notice.value).decode("utf-8", "replace")
        library.keepsake_string_free(notice)
    _Library.check(status, error)
    return told
