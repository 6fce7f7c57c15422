"""Named in ``VERL_USE_EXTERNAL_MODULES``: importing it registers all of drkernel's verl extensions."""

from drkernel.rl.integrations.verl import register

register()
