/*
 * The refine loop's progress card, a LangGraph generative-UI component.
 *
 * `langgraph dev` bundles this file (the "ui" entries of langgraph.json) and serves it to
 * chat clients; LangChain's agent-chat-ui loads it with `LoadExternalComponent` and shows
 * it under the AI message the card names. The props are `langgraph_refine.ProgressCard`,
 * pushed by `RefineMiddleware(progress_ui="refine_progress")` while an answer is judged,
 * after each round and at the end: the words are written by the loop, this only lays them
 * out. React is the chat's own (the bundler leaves `react` out), so the file needs no npm
 * install.
 */

type ProgressRound = {
  round: number;
  score: number | null;
  verdict: string | null;
  next: string;
  line: string;
};

type ProgressCard = {
  status: "running" | "done";
  title?: string; // absent from cards written before it was added
  judging: number | null;
  rounds: ProgressRound[];
  lines: string[];
  summary: string;
  score?: number | null;
  best_score: number | null;
  stop_reason: string | null;
};

const box = {
  border: "1px solid #d4d4d8",
  borderRadius: "8px",
  padding: "8px 12px",
  fontFamily: "ui-sans-serif, system-ui, sans-serif",
  fontSize: "13px",
  color: "#3f3f46",
  maxWidth: "32rem",
};

function RefineProgress(props: ProgressCard) {
  const running = props.status === "running";
  // While running the summary is the latest line, or what happens now ("round 2: judging…").
  const now = props.summary !== props.lines[props.lines.length - 1];
  return (
    <div style={box} data-refine-progress={props.status}>
      <div style={{ fontWeight: 600, marginBottom: "4px" }}>
        {props.title ?? (running ? "Refining the answer…" : "Done")}
      </div>
      <ol style={{ margin: 0, paddingLeft: "1.2em" }}>
        {props.rounds.map((item) => (
          <li key={item.round}>{item.line}</li>
        ))}
      </ol>
      {now ? (
        <div style={{ marginTop: "4px", color: "#71717a" }}>{props.summary}</div>
      ) : null}
    </div>
  );
}

export default { refine_progress: RefineProgress };
