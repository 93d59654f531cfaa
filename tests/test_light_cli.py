"""The command line is light (issue 33): building the parser, --help and a refused flag load no torch and no
matplotlib, the package face loads lazily, and `glm53 verify` never loads torch at all."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_building_the_parser_loads_neither_torch_nor_matplotlib():
    p = run_python("import sys; import glm53.cli; glm53.cli.build_parser(); "
                   "assert not {'torch', 'matplotlib', 'fastapi', 'uvicorn'} & set(sys.modules), "
                   "sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'matplotlib', 'fastapi', 'uvicorn'))")
    assert p.returncode == 0, p.stderr


# torch made unimportable: any import of it in the process fails
NO_TORCH = "import sys; sys.modules['torch'] = None; sys.modules['matplotlib'] = None; from glm53.cli import main; "


def test_help_and_a_refused_flag_answer_without_torch():
    for argv in (["--help"], ["verify", "--help"], ["rl", "--help"], ["run", "--help"], ["eval", "--help"],
                 ["serve", "--help"]):
        p = run_python(NO_TORCH + "sys.exit(main(sys.argv[1:]))", *argv)
        assert p.returncode == 0 and "usage: glm53" in p.stdout, (argv, p.stderr[-2000:])
    p = run_python(NO_TORCH + "sys.exit(main(sys.argv[1:]))", "pretrain", "--out", "x", "--device", "tpu")
    assert p.returncode == 2 and "invalid choice: 'tpu'" in p.stderr, p.stderr[-2000:]


def test_verify_runs_without_torch(tmp_path):
    row = {"prompt": "def f(x):\n", "completion": "    return x + 1\n", "entry_point": "f", "cases": [[[1], 2]]}
    (tmp_path / "in.jsonl").write_text(json.dumps(row) + "\n")
    p = run_python(NO_TORCH + "sys.exit(main(sys.argv[1:]))", "verify", "--in", str(tmp_path / "in.jsonl"),
                   "--out", str(tmp_path / "out.jsonl"))
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads((tmp_path / "out.jsonl").read_text())["verdict"]["status"] == "passed"


def test_the_package_face_is_unchanged_and_lazy():
    p = run_python("import sys, glm53; assert 'torch' not in sys.modules; "
                   "from glm53 import GLM53, ModelConfig, ByteTokenizer; "
                   "from glm53.model.model import GLM53 as G; assert GLM53 is G; "
                   "assert ModelConfig().dim == 192 and "
                   "ByteTokenizer().encode('a') == [ByteTokenizer().encode('a')[0]]")
    assert p.returncode == 0, p.stderr[-2000:]


def test_print_config_answers_without_torch():
    for argv in (["pretrain"], ["rl", "--init", "a", "--out", "b"], ["run", "--out", "r"],
                 ["run", "--preset", "broad", "--out", "r", "--rl-start", "1200"],
                 ["eval", "--checkpoint", "c", "--out", "o.json", "--split", "dev"]):
        p = run_python(NO_TORCH + "sys.exit(main(sys.argv[1:]))", *argv, "--print-config")
        assert p.returncode == 0 and "settings, resolved" in p.stdout, (argv, p.stderr[-2000:])
