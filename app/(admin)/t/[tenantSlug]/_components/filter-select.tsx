"use client";

import { Select } from "@/app/_components/ui/select";
import { cn } from "@/app/_components/ui/cn";

export type FilterOption = { value: string; label: string };

/** A compact select for a table's toolbar; "" is the "any" choice, listed first with `anyLabel`. */
export function FilterSelect({
  label,
  value,
  onChange,
  options,
  anyLabel,
  className,
}: {
  label: string;
  value: string;
  onChange: (value: string) => void;
  options: FilterOption[];
  anyLabel: string;
  className?: string;
}) {
  return (
    <div className={cn("w-40", className)}>
      <Select
        aria-label={label}
        value={value}
        onChange={(event) => onChange(event.target.value)}
        className="[&_select]:h-8"
      >
        <option value="">{anyLabel}</option>
        {options.map((option) => (
          <option key={option.value} value={option.value}>
            {option.label}
          </option>
        ))}
      </Select>
    </div>
  );
}
