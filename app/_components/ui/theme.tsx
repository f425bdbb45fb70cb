"use client";

import { Monitor, Moon, Sun } from "lucide-react";
import { createContext, type ReactNode, useCallback, useContext, useEffect, useState } from "react";
import { Button } from "./button";
import { THEME_STORAGE_KEY as STORAGE_KEY } from "./theme-boot";

type ThemeChoice = "light" | "dark" | "system";

const ThemeContext = createContext<{
  choice: ThemeChoice;
  theme: "light" | "dark";
  setChoice: (choice: ThemeChoice) => void;
}>({
  choice: "system",
  theme: "light",
  setChoice: () => {},
});

const prefersDark = () => window.matchMedia("(prefers-color-scheme: dark)").matches;

export function ThemeProvider({ children }: { children: ReactNode }) {
  const [choice, setChoiceState] = useState<ThemeChoice>("system");
  const [theme, setTheme] = useState<"light" | "dark">("light");

  const apply = useCallback((next: ThemeChoice) => {
    const dark = next === "dark" || (next === "system" && prefersDark());
    document.documentElement.classList.toggle("dark", dark);
    setTheme(dark ? "dark" : "light");
  }, []);

  useEffect(() => {
    const stored = localStorage.getItem(STORAGE_KEY);
    const initial: ThemeChoice = stored === "light" || stored === "dark" ? stored : "system";
    setChoiceState(initial);
    apply(initial);
    const media = window.matchMedia("(prefers-color-scheme: dark)");
    const onChange = () => {
      if ((localStorage.getItem(STORAGE_KEY) ?? "system") === "system") apply("system");
    };
    media.addEventListener("change", onChange);
    return () => media.removeEventListener("change", onChange);
  }, [apply]);

  const setChoice = useCallback(
    (next: ThemeChoice) => {
      localStorage.setItem(STORAGE_KEY, next);
      setChoiceState(next);
      apply(next);
    },
    [apply],
  );

  return <ThemeContext.Provider value={{ choice, theme, setChoice }}>{children}</ThemeContext.Provider>;
}

export const useTheme = () => useContext(ThemeContext);

const NEXT: Record<ThemeChoice, ThemeChoice> = { system: "light", light: "dark", dark: "system" };
const ICONS = { system: Monitor, light: Sun, dark: Moon } as const;

/** Cycles system → light → dark. */
export function ThemeToggle() {
  const { choice, setChoice } = useTheme();
  const Icon = ICONS[choice];
  return (
    <Button
      variant="ghost"
      size="icon-sm"
      aria-label={`Theme: ${choice} (change)`}
      title={`Theme: ${choice}`}
      onClick={() => setChoice(NEXT[choice])}
      data-testid="theme-toggle"
    >
      <Icon className="size-4" />
    </Button>
  );
}
