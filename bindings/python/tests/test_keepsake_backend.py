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
