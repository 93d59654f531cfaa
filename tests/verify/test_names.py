"""Every legal function name can be defined in the sandbox: a non-ASCII name (the parser imports unicodedata for
it, which a program's process in its empty root could not load) and names Python NFKC-normalises (`def ﬁx`
defines `fix`), at both language levels, through the API and `glm53 verify`."""

import json

import pytest

from glm53.verify.verifier import SandboxPool, verify
from glm53.verify.verify_file import verify_file

NAMES = ["dóuble", "ﬁx", "ｆｉｘ", "Straße", "ǅx"]


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(workers=1) as p:
        yield p


@pytest.mark.parametrize("language", ["reference", "python"])
@pytest.mark.parametrize("name", NAMES)
def test_a_correct_program_passes_under_any_legal_name(pool, name, language):
    assert name.isidentifier()
    right = verify(f"def {name}(x):\n    return 2 * x\n", name, [((1,), 2), ((3,), 6)], pool=pool, language=language)
    wrong = verify(f"def {name}(x):\n    return 2 + x\n", name, [((1,), 2), ((3,), 6)], pool=pool, language=language)
    assert (right.status, wrong.status) == ("passed", "failed"), (right, wrong)


def test_glm53_verify_judges_rows_with_such_names(tmp_path, pool):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": f"def {n}(x):\n", "completion": "    return 2 * x\n",
                                        "entry_point": n, "cases": [[[1], 2]]}, ensure_ascii=False) + "\n"
                            for n in NAMES), encoding="utf-8")
    assert verify_file(rows, tmp_path / "out.jsonl", pool=pool) == {"passed": len(NAMES)}
