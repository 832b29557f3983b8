"""The wheel carries libKeepsakeC.so (scripts/build-wheel puts it beside __init__.py): a platform
wheel, so that pip installs it only where the library runs."""
from setuptools import setup
from setuptools.dist import Distribution


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(distclass=BinaryDistribution)
