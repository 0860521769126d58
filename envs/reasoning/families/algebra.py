"""reasoning-gym's algebra datasets (equations, polynomials and integrals), one family each."""

from llmgym.envs.reasoning.bridge.source import LibraryFamily

FAMILIES = [
    LibraryFamily("complex_arithmetic", "complex number arithmetic problems"),
    LibraryFamily(
        "polynomial_equations", "random polynomial equations of degree in [min_degree, max_degree]"
    ),
    LibraryFamily("simple_equations", "simple equations with one variable to solve"),
    LibraryFamily("simple_integration", "simple integration problems with one variable"),
]
