"""The `glm53 export` command (thin: parse, check the output, export)."""

from __future__ import annotations

from ..runtime.files import refuse_unusable_output

FORMATS = ("glm53", "transformers")


def add_export_parser(sub) -> None:
    p = sub.add_parser("export", help="write a checkpoint as a weights-only folder with a model card",
                       description="The folder loads with GLM53.from_pretrained and can be pushed with "
                                   "model.push_to_hub(repo_id); with --format transformers, "
                                   "AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True) and "
                                   "AutoTokenizer.from_pretrained(folder) load it (docs/interop.md). The optimizer "
                                   "state stays behind (no resume).")
    p.add_argument("checkpoint", help="checkpoint folder (holding model.safetensors and metadata.json)")
    p.add_argument("--out", required=True, help="folder to write (must not exist)")
    p.add_argument("--format", default="glm53", choices=FORMATS,
                   help="glm53: glm53's own folder (GLM53.from_pretrained); transformers: a folder transformers "
                        "loads, with the tokenizer and the code that imports the installed glm53 (needs the hf "
                        "extra: bash scripts/install.sh --hf)")
    p.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    refuse_unusable_output(args.out)
    if args.format == "transformers":
        from ..runtime.providers import provider

        out = provider("transformers export")(args.checkpoint, args.out)
        print(f"exported {args.checkpoint} to {out} for transformers (model.safetensors, config.json, the modeling "
              "files, the tokenizer, README.md)")
        return 0
    from .export import export_model

    out = export_model(args.checkpoint, args.out)
    print(f"exported {args.checkpoint} to {out} (model.safetensors, config.json, README.md)")
    return 0
