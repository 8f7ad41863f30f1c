/*
 * main.c: cairn's entry point. Finds the command whose words match the
 * start of argv (longest match wins), parses its flags from the table in
 * base/flags.def and runs it. `cairn --help`, `cairn help WORDS...` and
 * `cairn WORDS... --help` print generated help.
 */
#include "config.h"
#include "cmd/cli.h"
#include "base/log.h"

#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Number of argv words that match cmd->words, or 0 if it does not match. */
static int
match_words(const char *words, int argc, char **argv)
{
	const char *p = words;
	int n = 0;

	while (*p != '\0') {
		size_t len = strcspn(p, " ");

		if (n >= argc || strlen(argv[n]) != len ||
		    strncmp(argv[n], p, len) != 0)
			return 0;
		n++;
		p += len;
		while (*p == ' ')
			p++;
	}
	return n;
}

static const struct cli_command *
find_command(int argc, char **argv, int *used)
{
	const struct cli_command *best = NULL;
	int bestn = 0;

	for (size_t i = 0; i < cli_ncommands; i++) {
		int n = match_words(cli_commands[i].words, argc, argv);

		if (n > bestn) {
			best = &cli_commands[i];
			bestn = n;
		}
	}
	*used = bestn;
	return best;
}

static void
print_overview(FILE *f)
{
	fprintf(f,
	    "cairn backs up and restores Kubernetes clusters: one binary, a small\n"
	    "footprint, and backups that are never lost or run twice when servers\n"
	    "crash, restart or run side by side.\n\n"
	    "Usage: cairn COMMAND [FLAGS] [ARGS]\n\nCommands:\n");
	for (size_t i = 0; i < cli_ncommands; i++)
		fprintf(f, "  %-26s %s\n", cli_commands[i].words,
		    cli_commands[i].summary);
	fprintf(f, "\nRun 'cairn help COMMAND' or 'cairn COMMAND --help' for "
	    "details. Durations are written 500ms, 3s, 72h.\n");
}

static void
print_command_help(const struct cli_command *cmd, FILE *f)
{
	const enum flag_id *lists[] = { cmd->flags, cli_global_flags, NULL };
	struct buf b;

	fprintf(f, "Usage: cairn %s%s%s\n\n%s.\n", cmd->words,
	    cmd->usage[0] ? " " : "", cmd->usage, cmd->summary);
	if (cmd->description != NULL)
		fprintf(f, "\n%s\n", cmd->description);
	buf_init(&b, 1 << 20);
	flags_help(&b, lists);
	fprintf(f, "\nFlags:\n%s", buf_cstr(&b));
	buf_free(&b);
}

/* Commands that start with the given words ("backup" -> backup create...). */
static int
print_group(int argc, char **argv, FILE *f)
{
	int shown = 0;

	if (argc < 1)
		return 0;
	for (size_t i = 0; i < cli_ncommands; i++) {
		const char *w = cli_commands[i].words;
		size_t len = strlen(argv[0]);

		if (strncmp(w, argv[0], len) == 0 && w[len] == ' ') {
			if (!shown)
				fprintf(f, "Commands of 'cairn %s':\n", argv[0]);
			fprintf(f, "  %-26s %s\n", w, cli_commands[i].summary);
			shown = 1;
		}
	}
	return shown;
}

int
cli_usage_error(const struct cli_command *cmd, const char *fmt, ...)
{
	va_list ap;

	fputs("cairn: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (cmd != NULL)
		fprintf(stderr, "\nUsage: cairn %s %s (see 'cairn %s --help')\n",
		    cmd->words, cmd->usage, cmd->words);
	else
		fprintf(stderr, "\nUsage: cairn COMMAND [FLAGS] [ARGS] "
		    "(see 'cairn --help')\n");
	return CLI_EXIT_USAGE;
}

int
cli_fail(const char *fmt, ...)
{
	va_list ap;

	fputs("cairn: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CLI_EXIT_FAIL;
}

int
cli_setup_logging(const struct cli_command *cmd, const struct flagset *fs)
{
	struct cairn_err err = CAIRN_ERR_INIT;

	if (log_configure(flag_str(fs, F_LOG_LEVEL), flag_str(fs, F_LOG_FORMAT),
	    &err) < 0)
		return cli_usage_error(cmd, "%s", err.msg);
	return 0;
}

static int
run(int argc, char **argv)
{
	const struct cli_command *cmd;
	const enum flag_id *lists[3];
	struct cairn_err err = CAIRN_ERR_INIT;
	struct flagset fs;
	int used, rc;

	if (argc < 1 || strcmp(argv[0], "--help") == 0 ||
	    strcmp(argv[0], "-h") == 0) {
		print_overview(stdout);
		return argc < 1 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
	}
	if (strcmp(argv[0], "help") == 0) {
		if (argc == 1) {
			print_overview(stdout);
			return CLI_EXIT_OK;
		}
		cmd = find_command(argc - 1, argv + 1, &used);
		if (cmd != NULL && used == argc - 1) {
			print_command_help(cmd, stdout);
			return CLI_EXIT_OK;
		}
		if (argc == 2 && print_group(1, argv + 1, stdout))
			return CLI_EXIT_OK;
		return cli_usage_error(NULL, "unknown command \"%s\"", argv[1]);
	}
	if (strcmp(argv[0], "--version") == 0)
		argv[0] = (char *)"version";
	cmd = find_command(argc, argv, &used);
	if (cmd == NULL) {
		if (argv[0][0] == '-')
			return cli_usage_error(NULL, "unknown flag %s", argv[0]);
		if (print_group(argc, argv, stderr))
			return cli_usage_error(NULL, "\"%s\" needs a subcommand",
			    argv[0]);
		return cli_usage_error(NULL, "unknown command \"%s\"", argv[0]);
	}
	lists[0] = cmd->flags;
	lists[1] = cli_global_flags;
	lists[2] = NULL;
	if (flags_parse(&fs, lists, argc - used,
	    (const char *const *)(argv + used), &err) < 0) {
		/* --help wins over any other problem on the line. */
		for (int i = used; i < argc; i++)
			if (strcmp(argv[i], "--help") == 0 ||
			    strcmp(argv[i], "-h") == 0) {
				flags_free(&fs);
				print_command_help(cmd, stdout);
				return CLI_EXIT_OK;
			}
		flags_free(&fs);
		return cli_usage_error(cmd, "%s", err.msg);
	}
	if (flag_bool(&fs, F_HELP)) {
		print_command_help(cmd, stdout);
		flags_free(&fs);
		return CLI_EXIT_OK;
	}
	rc = cli_setup_logging(cmd, &fs);
	if (rc == 0)
		rc = cmd->run(cmd, &fs);
	flags_free(&fs);
	return rc;
}

int
main(int argc, char **argv)
{
	int rc;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = run(argc - 1, argv + 1);
	curl_global_cleanup();
	return rc;
}
