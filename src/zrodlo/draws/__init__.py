"""Every seeded draw Zrodlo makes: ChaCha20 (RFC 8439) written here, addressed by counter, and what
is drawn from it (words, uniforms, normals, dropout keep-masks, the keyed bijection of window
order). Nothing in Zrodlo reads torch's, numpy's or Python's random state.

It imports only `zrodlo.storage`.
"""
