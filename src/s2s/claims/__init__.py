"""The paper's claims, checked against our numbers: what the claims stage computes and writes
(``outputs/claims/claims.json``, :class:`s2s.artifacts.Claims`) and the report renders as it is.

- :mod:`~s2s.claims.verdicts`: the verdict words and how differences with intervals make one;
- :mod:`~s2s.claims.seeds`: seed replicas, pairing on seeds, intervals over seeds;
- :mod:`~s2s.claims.paper_claims`: the claims about Tables 1 and 2, perplexity and cost;
- :mod:`~s2s.claims.analyses`: the reversal argument (gradient reach) and Figure 2;
- :mod:`~s2s.claims.forget_bias`: the forget-bias comparison;
- :mod:`~s2s.claims.inputs`: what the claims are checked against, read once;
- :mod:`~s2s.claims.check`: all of them, as the record the claims stage writes.

The paper's numbers and which of our outputs answers each of its rows are
:mod:`s2s.paper`'s (``paper.yaml``), which the report's tables print too.
"""
