"""keyring's own backend tests (keyring.testing.backend.BackendBasicTests, from the pinned
keyring release) against the Keepsake backend, and what Keepsake adds: keyring picks it once
installed, and the Secret Service never holds a password in clear."""

import os
import subprocess
import sys

import keyring
from keyring.testing.backend import BackendBasicTests

from keyring_keepsake import KeepsakeKeyring, unlock


class TestKeepsakeKeyring(BackendBasicTests):
    def init_keyring(self):
        return KeepsakeKeyring()


def test_keyring_picks_it():
    # Alone, or first of keyring's chain when its own Secret Service backend is viable too
    # (SecretStorage installed, as keyring's Linux dependencies bring it): sets go to the first.
    chosen = keyring.get_keyring()
    first = chosen.backends[0] if hasattr(chosen, "backends") else chosen
    assert isinstance(first, KeepsakeKeyring), chosen


def test_command_line_through_it():
    environment = dict(os.environ)
    run = lambda *arguments, **options: subprocess.run(
        [sys.executable, "-m", "keyring", *arguments], env=environment, capture_output=True,
        text=True, **options)
    assert run("set", "cli-service", "cli-user", input="cli-password-7Q\n").returncode == 0
    got = run("get", "cli-service", "cli-user")
    assert got.returncode == 0 and got.stdout.strip() == "cli-password-7Q"
    assert run("del", "cli-service", "cli-user").returncode == 0
    assert run("get", "cli-service", "cli-user").returncode == 1


def test_sealed_in_the_secret_service():
    backend = KeepsakeKeyring()
    password = "plain-password-5e1f9a0c-never-in-clear"
    backend.set_password("sealed-service", "sealed-user", password)
    try:
        # An ordinary Secret Service client reads every item of Keepsake's schema: sealed bytes.
        # (On KWallet under load secret-tool now and then lists the items without their
        # secrets: asked again, up to 3 times.)
        for _ in range(3):
            dump = subprocess.run(
                ["secret-tool", "search", "--all", "--unlock", "xdg:schema",
                 "org.keepsake.GenericPassword"],
                capture_output=True, check=True)
            listing = dump.stdout + dump.stderr
            if b"secret = " in listing:
                break
        assert b"secret = KSK2" in listing
        assert password.encode() not in listing
        assert password[:16].encode() not in listing
    finally:
        backend.delete_password("sealed-service", "sealed-user")


def test_unlock_passes_on_the_notice():
    # No lock screen on this device: nothing to unlock, nothing to tell; a passcode is bytes.
    assert unlock(b"1234") is None
    try:
        unlock("1234")
    except TypeError:
        pass
    else:
        raise AssertionError("a str passcode was taken")


def test_a_nul_in_a_name_is_refused_before_the_call():
    backend = KeepsakeKeyring()
    backend.set_password("bank", "alice", "alice-secret")
    try:
        for call in (
            lambda: backend.set_password("bank\x00evil", "alice", "overwritten"),
            lambda: backend.set_password("bank", "alice\x00x", "overwritten"),
            lambda: backend.delete_password("bank\x00x", "alice"),
            lambda: backend.get_password("bank\x00x", "alice"),
        ):
            try:
                call()
            except ValueError as error:
                assert "NUL" in str(error)
            else:
                raise AssertionError("a name with a NUL was taken")
        assert backend.get_password("bank", "alice") == "alice-secret"
    finally:
        backend.delete_password("bank", "alice")


def _formatted(error):
    """Everything an error shows: its repr, its str, and the same of what it chains."""
    parts = []
    while error is not None:
        parts += [repr(error), str(error), repr(getattr(error, "args", ()))]
        error = error.__cause__ or error.__context__
    return " ".join(parts)


def test_errors_never_hold_a_secret():
    backend = KeepsakeKeyring()
    # A password with a lone surrogate cannot be UTF-8: refused, and the error does not show it.
    secret = "lone-\ud800-surrogate-secret-91c2"
    try:
        backend.set_password("errors-service", "errors-user", secret)
    except ValueError as error:
        assert "surrogate-secret-91c2" not in _formatted(error)
    else:
        raise AssertionError("a lone surrogate was taken")
    # A secret that is not UTF-8 (stored through the C interface): the read fails without it.
    from keyring_keepsake import _Library
    import ctypes
    library, app = _Library.get()
    raw = b"\xff\xfe-not-utf8-secret-77ab"
    buffer = ctypes.create_string_buffer(raw, len(raw))
    assert library.keepsake_password_add(
        app, b"errors-service", b"binary", ctypes.addressof(buffer), len(raw),
        b"after-first-unlock-this-device-only", 0, None) == 0
    try:
        backend.get_password("errors-service", "binary")
    except Exception as error:  # noqa: BLE001 (any error, as long as it holds nothing)
        shown = _formatted(error)
        assert "not-utf8-secret" not in shown and "\\xff\\xfe" not in shown, shown
    else:
        raise AssertionError("a secret that is not UTF-8 was returned as text")
    finally:
        backend.delete_password("errors-service", "binary")


def test_first_use_from_eight_threads_opens_one_handle():
    script = r'''
import threading, keyring_keepsake as k
opened = []
real = k._load
def counting():
    library = real()
    original = library.keepsake_app_open
    def app_open(*arguments):
        opened.append(1)
        return original(*arguments)
    library.keepsake_app_open = app_open
    return library
k._load = counting
barrier = threading.Barrier(8)
def use():
    barrier.wait()
    k.KeepsakeKeyring().get_password("threads-service", "nobody")
threads = [threading.Thread(target=use) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
print(len(opened))
'''
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "1", run.stdout


def test_set_stays_whole_while_another_thread_deletes():
    import threading
    backend = KeepsakeKeyring()
    failures = []
    stop = threading.Event()

    def deleter():
        while not stop.is_set():
            try:
                backend.delete_password("race-service", "race-user")
            except Exception:  # noqa: BLE001 (nothing there: fine)
                pass

    thread = threading.Thread(target=deleter)
    thread.start()
    try:
        for round in range(40):
            try:
                backend.set_password("race-service", "race-user", f"value-{round}")
            except Exception as error:  # noqa: BLE001
                failures.append(repr(error))
    finally:
        stop.set()
        thread.join()
    try:
        backend.delete_password("race-service", "race-user")
    except Exception:  # noqa: BLE001
        pass
    assert failures == [], failures
