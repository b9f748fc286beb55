"""compare.py GLOO_XML WEFT_XML — compares two junit results of PyTorch's
distributed suite (tests/torch/suite/run.sh): every test that passes on
gloo must pass on weft. A test weft does not pass counts against it unless
the suite itself skipped it on weft by a rule that names gloo (a feature
the suite grants only to gloo and nccl, such as CUDA tensors) or it is in
KNOWN_DIFFERENCES with its reason. Exits 1 when a test counts against weft.
"""
import sys
import xml.etree.ElementTree as ET

# test name prefix -> why weft does not pass it (also in torch/README.md).
KNOWN_DIFFERENCES = {
    "test_ddp_logging_data_cpu": "torch 2.x records every backend registered from Python as 'custom' in DDP's "
                                 "logging (ProcessGroup::getBackendName names the backend type, CUSTOM for a "
                                 "plugin), while the test expects dist.get_backend()'s 'weft'",
}


def outcomes(path):
    """{test name: (outcome, message)} from a junit XML file."""
    result = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = "skipped" if tag == "skipped" else "failed"
                message = (node.get("message") or "").splitlines()[0] if node.get("message") else ""
                break
        result[case.get("name")] = (outcome, message)
    return result


def known_reason(name):
    for prefix, reason in KNOWN_DIFFERENCES.items():
        if name.startswith(prefix):
            return reason
    return None


def main(gloo_xml, weft_xml):
    gloo, weft = outcomes(gloo_xml), outcomes(weft_xml)
    counts = {}
    for name, (outcome, _) in weft.items():
        counts[outcome] = counts.get(outcome, 0) + 1
    print(f"gloo: {sum(o == 'passed' for o, _ in gloo.values())} passed of {len(gloo)}; "
          f"weft: {counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, "
          f"{counts.get('skipped', 0)} skipped of {len(weft)}")
    against, by_rule, known = [], [], []
    for name, (outcome, _) in sorted(gloo.items()):
        if outcome != "passed":
            continue
        w_outcome, w_message = weft.get(name, ("missing", ""))
        if w_outcome == "passed":
            continue
        if w_outcome == "skipped" and "gloo" in w_message.lower():
            by_rule.append((name, w_message))
        elif known_reason(name):
            known.append((name, known_reason(name)))
        else:
            against.append((name, w_outcome, w_message))
    print(f"passed on gloo, skipped on weft by a rule that names gloo: {len(by_rule)}")
    for name, message in by_rule:
        print(f"  {name}: {message}")
    print(f"passed on gloo, known differences on weft: {len(known)}")
    for name, reason in known:
        print(f"  {name}: {reason}")
    print(f"passed on gloo, not on weft: {len(against)}")
    for name, outcome, message in against:
        print(f"  {name}: {outcome}: {message[:200]}")
    extra = sorted(n for n, (o, _) in weft.items() if o == "passed" and gloo.get(n, ("",))[0] != "passed")
    print(f"passed on weft, not on gloo: {len(extra)}")
    for name in extra:
        print(f"  {name}: gloo {gloo.get(name, ('missing',))[0]}")
    return 1 if against else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
