# GitHub workflow commands for faultline's results.json (schema
# faultline/results/v1): one ::error per run of the correct pipeline that
# failed (a known finding the target file declares aside), one per variant
# the gate did not catch, one per known finding not reproduced. Used by
# action.yml as: jq -r --arg target FILE -f annotations.jq results.json

# A workflow command's message escapes %, CR and LF; a property also : and ,.
def msg: tostring | gsub("%"; "%25") | gsub("\r"; "%0D") | gsub("\n"; "%0A");
def prop: msg | gsub(":"; "%3A") | gsub(","; "%2C");

# How many events broke one violation: those its stages place, else the
# eventIds it names.
def count: ([.stages // {} | .[] | .[]] | length) as $n
  | if $n > 0 then $n else (.event_ids // [] | length) end;

# The violations a run failed with: broken invariants the scenario did not
# expect, that were checked and converged.
def violations: [.invariants // [] | .[]
  | select((.ok | not) and (.expected | not) and (.not_checked | not) and (.unconverged | not))
  | .violations // [] | .[] | "\(.kind) \(count)"];

(.scenarios // [] | .[]
  | select(.variant == "correct" and .verdict == "fail" and (.known | not))
  | (violations | join(", ")) as $v
  | "::error title=\("faultline: \(.name) failed" | prop)::\(
      "\(.name) (seed \(.seed)) failed: \(if $v == "" then (.reason // "an invariant broke") else $v end)"
      + (if .window then "\nwindow: \(.window)" else "" end)
      + "\nreproduce: faultline run --target \($target) --seed \(.seed) \(.name)"
      | msg)"),
(.variants // [] | .[]
  | select(.caught | not)
  | "::error title=\("faultline: variant \(.name) not caught" | prop)::\(
      "variant \(.name) was not caught"
      + (if .expected then " as \(.expected)" else "" end)
      + (if .guard then " (its missing guard: \(.guard))" else "" end)
      + (if (.missed // []) != [] then "\nmissed by: \(.missed | join(", "))" else "" end)
      + (if (.not_run // []) != [] then "\nnot run: \(.not_run | join(", "))" else "" end)
      + (if (.indeterminate // []) != [] then "\nindeterminate: \(.indeterminate | join(", "))" else "" end)
      | msg)"),
(.known_findings // [] | .[]
  | select(.status == "not-reproduced" or .status == "other-violations")
  | "::error title=\("faultline: known finding \(.scenario) \(.status)" | prop)::\(
      "known finding \(.scenario) (\(.violations | join(", "))): \(.status)"
      + (if .detail then "\n\(.detail)" else "" end)
      | msg)")
