import { ChevronDown } from "lucide-react";
import type { ComponentProps } from "react";
import { cn } from "./cn";
import { controlClasses } from "./input";

/**
 * A styled native `<select>`: keyboard, screen readers, phones and form submission all work as the platform
 * makes them, with no portal or custom listbox to get wrong.
 */
export function Select({ className, children, ...props }: ComponentProps<"select">) {
  return (
    <div className={cn("relative w-full", className)} data-slot="select-wrapper">
      <select
        data-slot="select"
        className={cn(controlClasses, "h-9 cursor-pointer appearance-none py-1 pr-8")}
        {...props}
      >
        {children}
      </select>
      <ChevronDown
        aria-hidden
        className="text-muted-foreground pointer-events-none absolute top-1/2 right-2.5 size-4 -translate-y-1/2"
      />
    </div>
  );
}
