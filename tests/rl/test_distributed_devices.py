"""Which device each data-parallel rank trains and evaluates on (drkernel.rl.distributed.localize):
``auto`` / ``cuda`` become the rank's own GPU, for the policy and for the in-process gym, so N ranks'
evaluations spread over N GPUs instead of queueing on cuda:0. Checked on CPU with CUDA faked present."""

import pytest
import torch

from drkernel.errors import ConfigError
from drkernel.rl.config import config_from_dict
from drkernel.rl.distributed import DistContext, localize


def _config(model_device: str, eval_device: str, gym: str = "in_process"):
    gym_section = {"kind": gym, "url": "http://gym:8000"} if gym == "service" else {"kind": gym}
    return config_from_dict(
        {
            "model": {"source": "tiny", "device": model_device},
            "gym": gym_section,
            "eval": {"device": eval_device},
            "task": {"kind": "kernel", "problems": "builtin"},
        }
    )


@pytest.fixture
def cuda_present(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


@pytest.mark.parametrize("eval_device", ["auto", "cuda"])
def test_each_rank_evaluates_on_its_own_gpu(cuda_present, eval_device):
    for rank in range(4):
        local = localize(_config("cuda", eval_device), DistContext(rank, 4, local_rank=rank))
        assert (local.model.device, local.eval.device) == (f"cuda:{rank}", f"cuda:{rank}")


def test_one_process_and_cpu_keep_their_device(cuda_present):
    single = localize(_config("auto", "auto"), DistContext())
    assert (single.model.device, single.eval.device) == ("auto", "auto")  # the gym resolves "auto" itself
    cpu = localize(_config("cpu", "cpu"), DistContext(1, 2, local_rank=1))
    assert (cpu.model.device, cpu.eval.device) == ("cpu", "cpu")


def test_auto_without_cuda_stays_auto(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    local = localize(_config("auto", "auto"), DistContext(1, 2, local_rank=1))
    assert (local.model.device, local.eval.device) == ("auto", "auto")


def test_a_service_gym_keeps_the_requested_device(cuda_present):
    # The service places evaluations on its own GPUs; the rank's device is not the service's.
    local = localize(_config("cuda", "cuda", gym="service"), DistContext(2, 4, local_rank=2))
    assert (local.model.device, local.eval.device) == ("cuda:2", "cuda")


def test_one_gpu_named_for_several_ranks_is_an_error(cuda_present):
    with pytest.raises(ConfigError, match="eval.device='cuda:0'"):
        localize(_config("cuda", "cuda:0"), DistContext(1, 2, local_rank=1))
