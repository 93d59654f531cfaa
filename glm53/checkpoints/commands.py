"""The `glm53 export` command (thin: parse, check the output, export)."""

from __future__ import annotations

from ..runtime.files import refuse_unusable_output


def add_export_parser(sub) -> None:
    p = sub.add_parser("export", help="write a checkpoint as a weights-only folder with a model card",
                       description="The folder loads with GLM53.from_pretrained and can be pushed with "
                                   "model.push_to_hub(repo_id); the optimizer state stays behind (no resume).")
    p.add_argument("checkpoint", help="checkpoint folder (holding model.safetensors and metadata.json)")
    p.add_argument("--out", required=True, help="folder to write (must not exist)")
    p.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    from .export import export_model

    refuse_unusable_output(args.out)
    out = export_model(args.checkpoint, args.out)
    print(f"exported {args.checkpoint} to {out} (model.safetensors, config.json, README.md)")
    return 0
