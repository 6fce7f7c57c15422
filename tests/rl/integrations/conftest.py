"""The verl integration tests need verl (``pip install 'drkernel[verl]'``, run by ``make test-verl``).
Importing verl registers drkernel's extensions through verl's own plugin variable, as in training."""

import os

os.environ.setdefault("VERL_USE_EXTERNAL_MODULES", "drkernel.rl.integrations.verl.plugin")
