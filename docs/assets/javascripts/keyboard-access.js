/* The theme wraps each table in a box that scrolls sideways on a narrow screen. A reader
   without a mouse scrolls it with the arrow keys once it has the focus, so each box can take
   it (WCAG 2.1.1). Notebook code cells and formulas get theirs at build
   (hooks/keyboard_access.py); these boxes exist only once the theme's script has run. */
document$.subscribe(function () {
  document.querySelectorAll(".md-typeset__scrollwrap").forEach(function (box) {
    box.tabIndex = 0;
  });
});
