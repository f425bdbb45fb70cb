"use client";

import { Check, Copy } from "lucide-react";
import { useState } from "react";
import { toast } from "sonner";
import { Button } from "./button";
import { cn } from "./cn";

/** Copies `value` to the clipboard; the icon turns into a tick for a moment. */
export function CopyButton({
  value,
  label = "Copy",
  className,
}: {
  value: string;
  label?: string;
  className?: string;
}) {
  const [copied, setCopied] = useState(false);
  return (
    <Button
      variant="ghost"
      size="icon-sm"
      aria-label={label}
      title={label}
      className={cn("text-muted-foreground hover:text-foreground", className)}
      onClick={() => {
        navigator.clipboard.writeText(value).then(
          () => {
            setCopied(true);
            setTimeout(() => setCopied(false), 1500);
          },
          () => toast.error("The browser did not allow copying."),
        );
      }}
    >
      {copied ? <Check className="size-3.5" /> : <Copy className="size-3.5" />}
    </Button>
  );
}

/** An id shown short, in monospace, with a copy button for the whole of it. */
export function CopyableId({ value, short = true }: { value: string; short?: boolean }) {
  return (
    <span className="inline-flex items-center gap-0.5">
      <code className="text-muted-foreground font-mono text-xs" title={value}>
        {short && value.length > 12 ? value.slice(0, 8) : value}
      </code>
      <CopyButton value={value} label="Copy id" />
    </span>
  );
}
