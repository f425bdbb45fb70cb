import { AlertCircle, CheckCircle2 } from "lucide-react";
import type { ComponentProps } from "react";
import { cn } from "./cn";

/** An inline message: an error is announced (role="alert"), anything else is a polite status. */
export function Alert({
  tone = "error",
  className,
  children,
  ...props
}: ComponentProps<"div"> & { tone?: "error" | "success" | "info" }) {
  const Icon = tone === "success" ? CheckCircle2 : AlertCircle;
  return (
    <div
      role={tone === "error" ? "alert" : "status"}
      className={cn(
        "flex items-start gap-2.5 rounded-lg border px-4 py-3 text-sm",
        tone === "error" && "border-destructive/30 bg-destructive/5 text-destructive",
        tone === "success" && "border-success/30 bg-success/5 text-success",
        tone === "info" && "bg-muted/50 text-foreground",
        className,
      )}
      {...props}
    >
      <Icon aria-hidden className="mt-0.5 size-4 shrink-0" />
      <div className="min-w-0 flex-1 break-words">{children}</div>
    </div>
  );
}
