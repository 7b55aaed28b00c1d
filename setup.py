from setuptools import find_packages, setup

setup(
    name='gimmik',
    version='0.1.0',
    description='Generator of bespoke matrix multiplication kernels for '
                'small constant operator matrices',
    packages=find_packages(include=['gimmik', 'gimmik.*']),
    package_data={'gimmik': ['kernels/*/*.mako', 'emulate/*.h']},
    python_requires='>=3.10',
    install_requires=['mako', 'numpy', 'hip-python'],
    extras_require={'test': ['pytest', 'pytest-xdist', 'hypothesis', 'scipy',
                             'matplotlib'],
                    'plot': ['matplotlib']},
    entry_points={'console_scripts': ['gimmik = gimmik.cli:main']},
)
