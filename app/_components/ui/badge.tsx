import { cva, type VariantProps } from "class-variance-authority";
import type { ComponentProps } from "react";
import { cn } from "./cn";

export const badgeVariants = cva(
  "inline-flex w-fit shrink-0 items-center gap-1 rounded-md border px-1.5 py-0.5 text-xs font-medium whitespace-nowrap [&>svg]:size-3",
  {
    variants: {
      tone: {
        neutral: "bg-secondary text-secondary-foreground",
        success: "border-success/30 bg-success/10 text-success",
        warning: "border-warning/30 bg-warning/10 text-warning",
        danger: "border-destructive/30 bg-destructive/10 text-destructive",
        info: "border-info/30 bg-info/10 text-info",
        outline: "text-muted-foreground",
      },
    },
    defaultVariants: { tone: "neutral" },
  },
);
export type BadgeTone = NonNullable<VariantProps<typeof badgeVariants>["tone"]>;

export function Badge({
  className,
  tone,
  dot = false,
  children,
  ...props
}: ComponentProps<"span"> & VariantProps<typeof badgeVariants> & { dot?: boolean }) {
  return (
    <span data-slot="badge" className={cn(badgeVariants({ tone }), className)} {...props}>
      {dot && <span aria-hidden className="size-1.5 rounded-full bg-current" />}
      {children}
    </span>
  );
}

// The colour of a state, whatever the resource: one table so "ready" is green everywhere.
const STATE_TONES: Record<string, BadgeTone> = {
  ready: "success",
  active: "success",
  completed: "success",
  idle: "neutral",
  stopped: "neutral",
  pending: "info",
  provisioning: "info",
  running: "info",
  waiting: "info",
  delayed: "info",
  stopping: "warning",
  purging: "warning",
  cancelled: "warning",
  interrupted: "warning",
  error: "danger",
  failed: "danger",
  revoked: "danger",
  purged: "outline",
};

function stateTone(state: string): BadgeTone {
  return STATE_TONES[state.toLowerCase()] ?? "neutral";
}

/** A resource's state, lower-cased and coloured by what it means. */
export function StateBadge({ state, className, ...props }: { state: string } & ComponentProps<"span">) {
  const label = state.toLowerCase();
  return (
    <Badge tone={stateTone(label)} dot className={className} {...props}>
      {label}
    </Badge>
  );
}
