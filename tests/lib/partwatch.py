"""PartWatch: watches an fs store's multipart uploads from a thread.

Each upload directory `<root>/.cairn-uploads/<id>/` holds its key in a file
`key` and one file `part-NNNNN` per part. PartWatch polls them every 20 ms
and records, per part number, (first seen, last mtime), so a test can tell
which parts were written, and whether any was written again after a
moment (a kill, a takeover). `suffix` limits it to uploads whose key ends
so (one volume's tarball among a backup's).
"""
import os
import re
import threading
import time


class PartWatch:
    def __init__(self, root, suffix=None):
        self.root, self.suffix, self.seen, self.stop = root, suffix, {}, False
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def _wanted(self, d, files):
        if ".cairn-uploads" not in d:
            return False
        if self.suffix is None:
            return True
        if "key" not in files:
            return False
        try:
            with open(os.path.join(d, "key")) as kf:
                return kf.read().strip().endswith(self.suffix)
        except OSError:
            return False

    def run(self):
        while not self.stop:
            for d, _, files in os.walk(self.root):
                if not self._wanted(d, files):
                    continue
                for f in files:
                    m = re.match(r"part-(\d+)$", f)
                    if not m:
                        continue
                    try:
                        mt = os.stat(os.path.join(d, f)).st_mtime
                    except OSError:
                        continue
                    n = int(m.group(1))
                    first, last = self.seen.get(n, (time.time(), mt))
                    self.seen[n] = (first, max(last, mt))
            time.sleep(0.02)

    def close(self):
        self.stop = True
        self.th.join()
