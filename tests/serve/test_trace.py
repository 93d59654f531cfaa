"""The per-position view of the sparse layers (serve/trace.py) against the layers themselves: the keys it names are
the ones the layer's rule attends to, and its per-head weights times the values are the layer's own output."""

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.model.indexer_attention import IndexerSparseAttention
from glm53.model.sparse_attention import SparseAttention, sparse_attention_index
from glm53.serve.trace import RoutingRecorder, attention_picks

from ..tiny import TINY


@pytest.mark.parametrize("changes", [{}, {"sparse_selection": "indexer", "indexer_top_k": 4},
                                     {"sparse_selection": "indexer", "indexer_top_k": 4, "index_pool": 2}],
                         ids=["pattern", "indexer", "indexer-pooled"])
def test_the_picks_are_the_layers_own_keys_and_weights(changes):
    torch.manual_seed(0)
    model = GLM53(ModelConfig(**{**TINY, **changes})).eval()
    ids = torch.randint(4, 260, (1, 40)).tolist()[0]
    outputs = {}
    sparse = [(i, m) for i, layer in enumerate(model.layers) for m in layer.modules()
              if isinstance(m, (SparseAttention, IndexerSparseAttention))]
    for i, m in sparse:  # the attention output before its projection: [1, T, H * d]
        m.out.register_forward_pre_hook(lambda mod, args, i=i: outputs.__setitem__(i, args[0]))
    values = {}
    for i, m in sparse:
        m.register_forward_pre_hook(lambda mod, args, i=i, m=m: values.__setitem__(i, m.project(*args[:3])[2]))
    for position in (0, 9, 39):
        picks = attention_picks(model, ids, position)
        assert [p["layer"] for p in picks] == [i for i, _ in sparse]
        for (i, module), pick in zip(sparse, picks):
            keys = torch.tensor(pick["keys"])
            if isinstance(module, SparseAttention):
                index, valid = sparse_attention_index(position + 1, module.window, module.stride)
                assert pick["keys"] == index[position][valid[position]].tolist()
            per_head = torch.tensor(pick["per_head"])  # [H, keys]
            v = values[i][0, keys]  # [keys, H, d]
            mixed = torch.einsum("hk,khd->hd", per_head, v).flatten()
            torch.testing.assert_close(mixed, outputs[i][0, position], rtol=1e-4, atol=1e-5)
            assert sum(pick["weights"]) == pytest.approx(1.0)


def test_the_recorder_sees_every_moe_layers_routing_and_leaves_no_probe():
    """With one token the model's own expert usage is 1/k on exactly the experts it routed to, layer by layer."""
    torch.manual_seed(0)
    model = GLM53(ModelConfig(**TINY)).eval()
    for ids in torch.randint(4, 260, (5, 1, 1)):
        with RoutingRecorder(model) as recorder, torch.no_grad():
            _, aux = model(ids, return_aux=True)
        for layer, experts in enumerate(recorder.last):
            assert sorted(experts) == aux.expert_usage[layer].nonzero().flatten().tolist()
    assert all(m.routing_probe is None for m in recorder.moes)
