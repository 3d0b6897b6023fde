"use strict";
// Tabs (one per function) and each function's op filters. No network, no globals.
(function () {
  const tabs = document.querySelectorAll("#function-tabs [data-tab]");
  const panels = document.querySelectorAll("[data-panel]");
  tabs.forEach((tab) => {
    tab.addEventListener("click", () => {
      tabs.forEach((other) => other.setAttribute("aria-selected", String(other === tab)));
      panels.forEach((panel) => {
        panel.classList.toggle("hidden", panel.dataset.panel !== tab.dataset.tab);
      });
    });
  });

  panels.forEach((panel) => {
    const filter = panel.querySelector(".filter");
    const onlyOff = panel.querySelector(".only-off");
    const onlyProblems = panel.querySelector(".only-problems");
    const showConst = panel.querySelector(".show-const");
    const shown = panel.querySelector(".shown");
    const rows = Array.from(panel.querySelectorAll("tr.op"));
    const groups = Array.from(panel.querySelectorAll("tr.group"));
    let timer = 0;

    function apply() {
      const words = (filter ? filter.value : "").toLowerCase().split(/\s+/).filter(Boolean);
      let count = 0;
      for (const row of rows) {
        const visible =
          (row.dataset.compute === "1" || (showConst && showConst.checked)) &&
          (!onlyOff || !onlyOff.checked || row.dataset.off === "1") &&
          (!onlyProblems || !onlyProblems.checked || row.dataset.problem === "1") &&
          words.every((word) => row.dataset.text.includes(word));
        row.classList.toggle("hidden", !visible);
        if (visible) count += 1;
      }
      // a source line's header shows while one of its ops does
      for (const group of groups) {
        let next = group.nextElementSibling;
        let any = false;
        while (next && next.classList.contains("op")) {
          if (!next.classList.contains("hidden")) { any = true; break; }
          next = next.nextElementSibling;
        }
        group.classList.toggle("hidden", !any);
      }
      if (shown) shown.textContent = count + " of " + rows.length + " ops shown";
    }

    function later() {
      window.clearTimeout(timer);
      timer = window.setTimeout(apply, 120);
    }

    if (filter) filter.addEventListener("input", later);
    [onlyOff, onlyProblems, showConst].forEach((box) => box && box.addEventListener("change", apply));
    apply();
  });
  document.body.dataset.ready = "1";
})();
