"""Docker lanes: the lock file of image pins, and build / run / lock through the docker SDK.

One module per job: :mod:`.lock` (the lock file: lanes, pins, load and save), :mod:`.engine`
(the docker SDK and the engine behind small seams), :mod:`.build` (build context, CA bundle,
image builds), :mod:`.container` (container runs: GPUs, mounts, users) and :mod:`.digests`
(base tags resolved to registry digests). Nothing here needs torch.
"""
