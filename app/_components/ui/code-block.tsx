import { cn } from "./cn";
import { CopyButton } from "./copy-button";

const asText = (value: unknown): string =>
  typeof value === "string" ? value : (JSON.stringify(value, null, 2) ?? String(value));

/** Preformatted text or JSON, scrollable, with a copy button. */
export function CodeBlock({
  value,
  className,
  tone = "default",
  ...props
}: {
  value: unknown;
  className?: string;
  tone?: "default" | "error";
  "data-testid"?: string;
}) {
  const text = asText(value);
  return (
    <div className="group relative">
      <pre
        className={cn(
          "bg-muted/50 max-h-80 overflow-auto rounded-md border p-3 pr-10 font-mono text-xs leading-relaxed break-words whitespace-pre-wrap",
          tone === "error" && "border-destructive/30 bg-destructive/5 text-destructive",
          className,
        )}
        {...props}
      >
        {text}
      </pre>
      <CopyButton value={text} className="absolute top-1.5 right-1.5 opacity-60 group-hover:opacity-100" />
    </div>
  );
}
