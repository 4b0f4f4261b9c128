# SPDX-License-Identifier: Apache-2.0
# Only here to write weft/_checkout.py into the built package: the checkout it
# was installed from, whose build trees weft/_lib.py searches for libweft.so.
import os

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyCheckout(build_py):
    def run(self):
        super().run()
        top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if not os.path.isfile(os.path.join(top, "include", "weft", "weft.h")):
            top = None  # built from a copy outside a checkout: nothing to record
        with open(os.path.join(self.build_lib, "weft", "_checkout.py"), "w") as f:
            f.write("# SPDX-License-Identifier: Apache-2.0\n"
                    "# Written by setup.py at install: the checkout this package came from.\n"
                    "CHECKOUT = %r\n" % top)


setup(cmdclass={"build_py": BuildPyCheckout})
