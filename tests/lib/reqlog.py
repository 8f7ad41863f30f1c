"""reqlog.py: checks over kubesim's request log (/_sim/requests).

retry_after(log): did the client honour the 429s it was sent? For every
logged 429 with a Retry-After, the request re-sent (same method, path and
body CRC) must reach the server no sooner than the 429's reply plus its
Retry-After, and no other request of the same flow (method and path) may
arrive between GRACE after that reply (requests already on the wire when
it arrived) and the end of the Retry-After. Used by
tests/integration/test_kube_pushback.py and tests/bench/bench_restore.py.
"""

GRACE = 0.3     # requests already on the wire when the 429 arrived
SLACK = 0.01    # a reply is stamped after its last byte was written


def retry_after(log, grace=GRACE, slack=SLACK):
    """-> (429s seen, [problems as text]); log oldest first."""
    problems, seen = [], 0
    for i, e in enumerate(log):
        if e.get("status") != 429 or e.get("retryAfter") is None:
            continue
        seen += 1
        ra = e["retryAfter"]
        end = e["time"] + e.get("duration", 0)
        again = next((x for x in log[i + 1:] if x["method"] == e["method"] and
                      x["path"] == e["path"] and x.get("bodyCrc") == e.get("bodyCrc")), None)
        if again is None:
            problems.append("%s %s (seq %d) refused with 429 was never sent again" % (
                e["method"], e["path"], e["seq"]))
        elif again["time"] < end + ra - slack:
            problems.append("%s %s (seq %d) re-sent %.3f s after its 429, Retry-After %d s" % (
                e["method"], e["path"], again["seq"], again["time"] - end, ra))
        early = [x for x in log if x["method"] == e["method"] and x["path"] == e["path"] and
                 end + grace <= x["time"] < end + ra - slack]
        if early:
            problems.append("%d requests of the held flow %s %s sent %s s after a 429 with "
                            "Retry-After %d s" % (len(early), e["method"], e["path"],
                                                  ", ".join("%.3f" % (x["time"] - end) for x in early[:5]), ra))
    return seen, problems
