"""The README's first command runs scripts/demo.sh; its Python half
(scripts/demo.py) is run here against the built binary with a smaller
catalog, so a change that breaks the demo fails the suite: kubesim seeded
with examples/shop, CRDs and a local-directory location, cairn server,
`cairn backup create --wait` (objects and the shop database's hostPath
volume), describe, and the tarball read back with tarfile.
"""
import os
import subprocess
import sys

from cairntest import BIN, SRCDIR, case, main


@case
def demo_runs_end_to_end(t):
    env = dict(os.environ, CAIRN_BIN=BIN, CAIRN_DEMO_OBJECTS="500", TMPDIR=t.dir)
    r = subprocess.run([sys.executable, os.path.join(SRCDIR, "scripts", "demo.py")],
                       capture_output=True, text=True, timeout=300, env=env)
    out = r.stdout + r.stderr
    t.eq(r.returncode, 0, "demo exit code; output ends:\n" + out[-2000:])
    t.check("Phase:  Completed" in out, "the backup completed: " + out[-1500:])
    t.check(any(l.strip().startswith("pv-postgres-0") and "Completed" in l for l in out.splitlines()),
            "the volume is backed up: " + out[-1500:])
    t.check("backups/shop-backup/volumes/pv-postgres-0.index.tar.gz" in out, "volume copy index listed")
    t.check("plugins/cairn-hostpath/pv-postgres-0/packs/shop-backup-" in out, "its chunk packs listed")
    t.check("Done: a Velero-format backup" in out, out[-800:])


main()
