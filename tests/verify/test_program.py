"""What enters the verifier is a Program read by its fields (issue 45)."""

import pytest

from glm53.verify.program import Program, as_program
from glm53.verify.verifier import verify_many


def test_completed_joins_prompt_and_completion_and_freezes_the_cases():
    program = Program.completed("def f(x):\n", "    return x + 1\n", "f", [[[1], 2], [[5], 6]], "python")
    assert program == Program("def f(x):\n    return x + 1\n", "f", (((1,), 2), ((5,), 6)), "python")
    assert as_program(program) is program
    assert as_program(("src", "f", [((1,), 2)])) == Program("src", "f", [((1,), 2)], None)


def test_the_verifier_reads_each_field():
    right = Program.completed("def f(x):\n", "    return x + 1\n", "f", [[[1], 2]])
    wrong_entry = Program(right.source, "g", right.cases)
    wrong_case = Program(right.source, "f", (((1,), 3),))
    verdicts = verify_many([right, wrong_entry, wrong_case])
    assert [v.status for v in verdicts] == ["passed", "invalid", "failed"]
    with pytest.raises(ValueError, match="klingon"):  # the program's own level is the one looked up
        verify_many([Program(right.source, "f", right.cases, "klingon")])
