/* Keyboard access to what the theme builds in the browser. */
(function () {
  "use strict";

  /* Below 1220 px (76.25em) the navigation is a drawer outside the screen, opened by the
     header's menu button. Closed, it is inert: its links would be about ninety Tab stops that
     no one sees, between "Skip to content" and the content. The menu button, a label the
     theme leaves out of the Tab order, takes a stop: Enter or Space opens the drawer and puts
     the focus on its first link, Escape closes it and gives the focus back to the button.
     The drawer is replaced at each instant navigation, so it is looked up each time. */
  var wide = window.matchMedia("(min-width: 76.25em)");
  var toggle = document.getElementById("__drawer");
  var menu = document.querySelector('.md-header label[for="__drawer"]');

  function drawerOutOfReach() {
    var drawer = document.querySelector(".md-sidebar--primary");
    if (!toggle || !drawer) return;
    drawer.inert = !wide.matches && !toggle.checked;
    if (menu) menu.setAttribute("aria-expanded", String(toggle.checked));
  }

  if (toggle) {
    toggle.addEventListener("change", drawerOutOfReach);
    wide.addEventListener("change", drawerOutOfReach);
    document.addEventListener("keydown", function (event) {
      if (event.key !== "Escape" || !toggle.checked || wide.matches) return;
      toggle.click();
      if (menu) menu.focus();
    });
  }
  if (toggle && menu) {
    menu.tabIndex = 0;
    menu.setAttribute("role", "button");
    menu.setAttribute("aria-label", "Navigation");
    menu.addEventListener("keydown", function (event) {
      if (event.key !== "Enter" && event.key !== " ") return;
      event.preventDefault();
      event.stopPropagation();  // the theme's own Enter on a label would click it again
      toggle.click();  // what a click on the button does: the theme's own toggle
      if (toggle.checked) firstShownLink();
    });
  }

  /* The drawer shows the panel of the current page's section over the levels above it: the
     panel of the last toggle switched on (the theme's checkboxes), or the top level. Its first
     link that has a size (the current page's own link gives way to its contents' toggle). */
  function firstShownLink() {
    var drawer = document.querySelector(".md-sidebar--primary");
    var open = drawer.querySelectorAll("input.md-nav__toggle:checked ~ nav");
    var panel = open.length ? open[open.length - 1] : drawer;
    var links = panel.querySelectorAll(".md-nav__link[href]");
    for (var k = 0; k < links.length; k++) {
      if (links[k].getBoundingClientRect().width) return links[k].focus();
    }
  }

  /* The theme wraps each table in a box that scrolls sideways on a narrow screen. A reader
     without a mouse scrolls it with the arrow keys once it has the focus, so each box can
     take it (WCAG 2.1.1). Notebook code cells and formulas get theirs at build
     (hooks/keyboard_access.py); these boxes exist only once the theme's script has run. */
  document$.subscribe(function () {
    document.querySelectorAll(".md-typeset__scrollwrap").forEach(function (box) {
      box.tabIndex = 0;
    });
    drawerOutOfReach();
  });
})();
