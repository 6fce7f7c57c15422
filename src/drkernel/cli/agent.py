"""`drkernel agent serve-model|build-tiny`: serve a local model over an OpenAI-compatible API."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from drkernel.cli.devices import check_devices
from drkernel.cli.options import group

app = group("Kernel agent tools: a local model server, the tiny test model.")
console = Console()


@app.command("serve-model")
def serve_model(
    model: str = typer.Argument(..., metavar="MODEL", help="a Hugging Face model folder, or 'tiny' for the tiny built model"),
    name: str = typer.Option(None, "--name", help="model id served (default: the folder name)"),
    host: str = typer.Option("127.0.0.1", "--host", help="interface to bind (0.0.0.0: every interface)"),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="port to bind"),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda, cuda:N or auto: where the model runs"),
    batch_size: int = typer.Option(8, "--batch-size", min=1, help="requests generated together"),
    dtype: str = typer.Option("float32", "--dtype", help="weights dtype: float32, bfloat16 or float16"),
    reload: bool = typer.Option(
        True, "--reload/--no-reload", help="offer POST /update_weights_from_disk (a trainer's weight push)"
    ),
) -> None:
    """Serve MODEL at http://HOST:PORT/v1 (chat completions with token ids and log-probs); a trainer pushes
    new weights with POST /update_weights_from_disk {"model_path": FOLDER} (SGLang's route)."""
    check_devices([("--device", device)])
    if model != "tiny" and not Path(model).is_dir():
        console.print(f"[red]error:[/] {model} is not a model folder")
        raise typer.Exit(2)
    from drkernel.agent.policies.hf_local import HFLocalPolicy
    from drkernel.agent.server import serve

    if model == "tiny":
        from drkernel.agent.tiny import build_tiny

        m, tok = build_tiny()
        policy = HFLocalPolicy(m, tok, device=device, batch_size=batch_size, name="tiny")
    else:
        policy = HFLocalPolicy.from_pretrained(model, device=device, batch_size=batch_size, dtype=dtype)
    served = name or Path(model).name
    console.print(f"serving {served!r} at http://{host}:{port}/v1")
    serve(policy, served, host, port, reload=reload)


@app.command("build-tiny")
def build_tiny_cmd(
    out: Path = typer.Argument(..., metavar="OUT", help="folder to save the model and tokenizer to"),
    seed: int = typer.Option(0, "--seed", help="seed of the random weights"),
) -> None:
    """Build the tiny random model with its chat tokenizer and save it (loadable as hf:OUT)."""
    from drkernel.agent.tiny import save_tiny

    console.print(f"saved to {save_tiny(out, seed)}")
