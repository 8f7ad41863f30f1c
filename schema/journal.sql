-- schema/journal.sql: the SQLite schema of cairn's local journal.
--
-- This file is the source of truth. The build embeds it in the binary
-- (journal/local.mk generates journal/schema_sql.h from it); nothing in C
-- repeats these statements.
--
-- The file is a list of steps. A line "-- @version N" starts the statements
-- that take a journal from schema version N-1 to N; steps are numbered 1, 2,
-- 3... with no gaps. A new journal runs every step; an older journal runs
-- the steps above its PRAGMA user_version. All pending steps run in one
-- transaction together with the new user_version, so a crash during a
-- migration leaves the journal at its old version. Never edit a released
-- step: append a new one.
--
-- Times are integer microseconds since the Unix epoch (UTC).
-- Deleting an item deletes its child rows (ON DELETE CASCADE; the journal
-- runs with PRAGMA foreign_keys=ON).

-- @version 1

-- Items (Backup or Restore objects) this server claimed. One row per object
-- (kind, namespace, name, uid); a new claim of the same object (attempt+1)
-- updates the row and keeps its child rows, which is what resuming needs.
CREATE TABLE items (
	id		INTEGER PRIMARY KEY,
	kind		TEXT NOT NULL CHECK (kind IN ('Backup', 'Restore')),
	namespace	TEXT NOT NULL,
	name		TEXT NOT NULL,
	uid		TEXT NOT NULL,
	attempt		INTEGER NOT NULL CHECK (attempt >= 1),
	phase		TEXT NOT NULL,		-- the object's status.phase
	holder		TEXT NOT NULL,		-- server id that claimed it
	worker		TEXT NOT NULL,		-- "<server-id>/<n>"
	claimed_at	INTEGER NOT NULL,
	updated_at	INTEGER NOT NULL,
	finished_at	INTEGER,		-- NULL while the item runs
	total_items	INTEGER NOT NULL DEFAULT 0,
	items_done	INTEGER NOT NULL DEFAULT 0,
	bytes_done	INTEGER NOT NULL DEFAULT 0,
	UNIQUE (kind, namespace, name, uid)
);
CREATE INDEX items_phase ON items (phase, holder);

-- Backup checkpoints: one row per tarball part that is stored for good.
CREATE TABLE parts (
	item_id		INTEGER NOT NULL REFERENCES items (id) ON DELETE CASCADE,
	part_number	INTEGER NOT NULL CHECK (part_number >= 1),
	upload_id	TEXT NOT NULL,		-- S3 multipart upload id, or ''
	etag		TEXT NOT NULL,
	last_key	TEXT NOT NULL,		-- last item key inside the part
	items		INTEGER NOT NULL,	-- items in this part
	bytes		INTEGER NOT NULL,	-- compressed bytes of this part
	created_at	INTEGER NOT NULL,
	PRIMARY KEY (item_id, part_number)
) WITHOUT ROWID;

-- Restore progress: one row per restored item key.
CREATE TABLE restore_items (
	item_id		INTEGER NOT NULL REFERENCES items (id) ON DELETE CASCADE,
	key		TEXT NOT NULL,
	state		TEXT NOT NULL
			CHECK (state IN ('created', 'updated', 'skipped', 'failed')),
	at		INTEGER NOT NULL,
	PRIMARY KEY (item_id, key)
) WITHOUT ROWID;

-- Volume operations (VolumePluginBackup / VolumePluginRestore) of an item.
CREATE TABLE volume_ops (
	item_id		INTEGER NOT NULL REFERENCES items (id) ON DELETE CASCADE,
	volume		TEXT NOT NULL,
	phase		TEXT NOT NULL,
	bytes_done	INTEGER NOT NULL DEFAULT 0,
	bytes_total	INTEGER NOT NULL DEFAULT 0,
	files_done	INTEGER NOT NULL DEFAULT 0,
	files_total	INTEGER NOT NULL DEFAULT 0,
	last_file	TEXT NOT NULL DEFAULT '',
	updated_at	INTEGER NOT NULL,
	PRIMARY KEY (item_id, volume)
) WITHOUT ROWID;

-- The event log of an item, in order; it becomes the uploaded log.
CREATE TABLE events (
	id		INTEGER PRIMARY KEY,
	item_id		INTEGER NOT NULL REFERENCES items (id) ON DELETE CASCADE,
	at		INTEGER NOT NULL,
	level		TEXT NOT NULL,
	line		TEXT NOT NULL
);
CREATE INDEX events_item ON events (item_id, id);

-- Counters for /status and /metrics, by kind and outcome. They outlive the
-- items they count (pruning does not touch them).
CREATE TABLE counters (
	kind		TEXT NOT NULL,
	outcome		TEXT NOT NULL,
	n		INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (kind, outcome)
) WITHOUT ROWID;

-- @version 2

-- Why an item ended as it did ("3 items failed", "storage unavailable"),
-- shown with the recent results on /status.
ALTER TABLE items ADD COLUMN message TEXT NOT NULL DEFAULT '';
-- Pruning looks for finished items older than the retention period.
CREATE INDEX items_finished ON items (finished_at)
	WHERE finished_at IS NOT NULL;

-- @version 3

-- Where the paged list of the part's last item was: the continue token that
-- fetched the page holding that item ('' for a resource's first page, and
-- for parts recorded before this step). A resumed backup starts the list of
-- that resource there instead of at its first page.
ALTER TABLE parts ADD COLUMN list_continue TEXT NOT NULL DEFAULT '';

-- @version 4

-- Backup hooks (engine/hooks_backup.c): which pods a pre hook froze and
-- whose post hook has not run yet, and the hook counters, as the JSON the
-- Backup's status.checkpoint.hooks mirrors. Written before a pre hook runs
-- and after a post hook ran, so a restart thaws every pod left frozen.
CREATE TABLE hook_state (
	item_id		INTEGER PRIMARY KEY REFERENCES items (id) ON DELETE CASCADE,
	state		TEXT NOT NULL,
	updated_at	INTEGER NOT NULL
);

-- @version 5

-- SHA-256 (hex) of the part's compressed bytes as cairn produced them (before
-- any encryption), recorded with the backup so that `cairn backup verify`
-- and restores can check each stored part ('' for parts recorded before).
ALTER TABLE parts ADD COLUMN sha256 TEXT NOT NULL DEFAULT '';

-- @version 6

-- The warnings and errors an item recorded (status.warnings/.errors) and
-- the schedule its metrics are labelled with (a Backup's
-- cairn.io/schedule-name label; a Restore's: its backup's), so that
-- /status and /metrics read the same numbers as the object's status.
ALTER TABLE items ADD COLUMN warnings INTEGER NOT NULL DEFAULT 0;
ALTER TABLE items ADD COLUMN errors INTEGER NOT NULL DEFAULT 0;
ALTER TABLE items ADD COLUMN schedule TEXT NOT NULL DEFAULT '';
-- Velero-style fields of an event line (logfmt text such as
-- 'resource=configmaps namespace=app'), written after its message in the
-- uploaded log.
ALTER TABLE events ADD COLUMN fields TEXT NOT NULL DEFAULT '';
