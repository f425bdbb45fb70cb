import type { ComponentProps } from "react";
import { cn } from "./cn";
import { controlClasses } from "./input";

export function Textarea({ className, ...props }: ComponentProps<"textarea">) {
  return (
    <textarea
      data-slot="textarea"
      className={cn(controlClasses, "field-sizing-content min-h-20 py-2", className)}
      {...props}
    />
  );
}
