/**
 * One stored chat message, read-only. `content` is an AI SDK model message's content as stored (a string,
 * or parts: text, reasoning, tool-call, tool-result, files); anything unexpected is shown as JSON rather
 * than dropped, so the page never hides what the history holds.
 */
type Part = Record<string, unknown> & { type?: unknown };

const json = (value: unknown): string => JSON.stringify(value, null, 2) ?? "";
/** A part's field as text: strings as they are, anything else as JSON (a malformed part still shows). */
const asText = (value: unknown): string =>
  typeof value === "string" ? value : value == null ? "" : json(value);

function Code({ value }: { value: unknown }) {
  return <pre className="code">{typeof value === "string" ? value : json(value)}</pre>;
}

/** A tool result's `output`: `{ type: "text" | "json" | "error-text" | "error-json" | "content", value }`. */
function ToolOutput({ output }: { output: unknown }) {
  if (output && typeof output === "object" && "type" in output && "value" in output) {
    const type = String(output.type);
    return (
      <div className={type.startsWith("error") ? "tool-output error" : "tool-output"}>
        {type.startsWith("error") && <span className="badge revoked">error</span>}
        <Code value={output.value} />
      </div>
    );
  }
  return <Code value={output} />;
}

function PartView({ part }: { part: Part }) {
  switch (part.type) {
    case "text":
      return <p className="message-text">{asText(part.text)}</p>;
    case "reasoning":
      return (
        <details className="message-reasoning">
          <summary>Reasoning</summary>
          <p className="message-text">{asText(part.text)}</p>
        </details>
      );
    case "tool-call":
      return (
        <div className="tool-call" data-testid="tool-call">
          <div>
            Tool call <code>{asText(part.toolName)}</code>{" "}
            <span className="muted mono">{asText(part.toolCallId)}</span>
          </div>
          <Code value={part.input} />
        </div>
      );
    case "tool-result":
      return (
        <div className="tool-call" data-testid="tool-result">
          <div>
            Result of <code>{asText(part.toolName)}</code>{" "}
            <span className="muted mono">{asText(part.toolCallId)}</span>
          </div>
          <ToolOutput output={part.output} />
        </div>
      );
    default:
      return <Code value={part} />;
  }
}

export type HistoryMessage = {
  id: string;
  role: string;
  content: unknown;
  toolCalls: unknown;
  createdAt: Date;
};

export function MessageView({ message }: { message: HistoryMessage }) {
  const { content } = message;
  return (
    <li className={`message role-${message.role}`} data-testid="chat-message">
      <div className="message-meta">
        <strong>{message.role}</strong>
        <span className="muted">{message.createdAt.toLocaleString()}</span>
      </div>
      {typeof content === "string" ? (
        <p className="message-text">{content}</p>
      ) : Array.isArray(content) ? (
        content.map((part: unknown, index) =>
          part && typeof part === "object" ? (
            <PartView key={index} part={part as Part} />
          ) : (
            <Code key={index} value={part} />
          ),
        )
      ) : (
        <Code value={content} />
      )}
      {message.toolCalls != null && (
        <details>
          <summary>Tool calls (stored separately)</summary>
          <Code value={message.toolCalls} />
        </details>
      )}
    </li>
  );
}
