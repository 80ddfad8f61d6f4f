# docrun prelude: render() stops the example's endless watch once it has
# shown the labelled session a second process saves meanwhile.
import os
import threading
import time

import savepoint


def _save_one() -> None:
    time.sleep(0.5)
    with savepoint.Client() as c:
        c.start("docrun-watched", "watched", labels={"team": "infra"}, replace=True)


threading.Thread(target=_save_one, daemon=True).start()


def render(shown: dict) -> None:
    if "docrun-watched" in shown:
        os._exit(0)
