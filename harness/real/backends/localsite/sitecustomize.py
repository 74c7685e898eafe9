"""Start-up hook for node processes of the `local` backend (never imported by the harness itself).

KRAFTWERK_BIND_ADDRESS=127.0.0.x makes every outgoing asyncio connection to a loopback
address leave from that address, so iptables can tell the nodes apart by source address
(the kernel would otherwise send all loopback traffic from 127.0.0.1). Then the libfaketime
`time.sleep` workaround of the node image is applied as well (only one sitecustomize runs).
"""

import os
from pathlib import Path

_address = os.environ.get("KRAFTWERK_BIND_ADDRESS")
if _address:
    from asyncio import base_events as _base_events

    _create_connection = _base_events.BaseEventLoop.create_connection

    async def _bound_create_connection(self, protocol_factory, host=None, port=None, **kwargs):
        if kwargs.get("local_addr") is None and kwargs.get("sock") is None and str(host).startswith("127."):
            kwargs["local_addr"] = (_address, 0)
        return await _create_connection(self, protocol_factory, host, port, **kwargs)

    _base_events.BaseEventLoop.create_connection = _bound_create_connection

_faketime_shim = Path(__file__).resolve().parents[4] / "docker" / "rootfs" / "opt" / "kraftwerk" / "faketime"
if (_faketime_shim / "sitecustomize.py").is_file():
    exec(compile((_faketime_shim / "sitecustomize.py").read_text(), str(_faketime_shim / "sitecustomize.py"), "exec"))
