import { cn } from "@/app/_components/ui/cn";

/** The Berth mark (same drawing as app/icon.svg, the favicon) and name. */
function BrandMark({ className }: { className?: string }) {
  return (
    <svg viewBox="0 0 32 32" aria-hidden className={cn("size-6 shrink-0", className)}>
      <rect width="32" height="32" rx="8" className="fill-foreground" />
      <path
        d="M9 8h8.2c3.3 0 5.3 1.7 5.3 4.3 0 1.7-.9 2.9-2.3 3.5 1.9.5 3.1 1.9 3.1 3.9 0 2.9-2.2 4.3-5.7 4.3H9z"
        fill="none"
        className="stroke-background"
        strokeWidth="2.4"
        strokeLinejoin="round"
      />
      <circle cx="24" cy="8" r="2.5" fill="#60a5fa" />
    </svg>
  );
}

export function Brand({ className }: { className?: string }) {
  return (
    <span className={cn("flex items-center gap-2 text-[15px] font-semibold tracking-tight", className)}>
      <BrandMark />
      Berth
    </span>
  );
}
