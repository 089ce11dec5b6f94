//! `#[airq_test::test]`: one attribute for every test of airq's black-box suites, so a module
//! can be shared by the embedded binary (`tests/api`, the standard harness) and the backend pairs'
//! binaries (`tests/api_postgres`, `tests/api_questdb`, `tests/api_questdb_spool`, whose harness
//! decides at run time whether their databases are reachable: `tests/support/trials.rs`).
//!
//! On an `async fn` it takes `#[tokio::test]`'s arguments (`flavor = "multi_thread"`,
//! `worker_threads = N`) and gives the test the runtime `#[tokio::test(…)]` would; on a plain
//! `fn` none. The function keeps its body under a hidden name (`__airq_test_NAME`) and is called
//! from two places: a `#[test] fn NAME`, which libtest runs where the binary has the standard
//! harness (and which rustc drops where it has not), and an entry of `crate::trials::TRIALS`
//! (a `linkme` slice) with the module path and `NAME`, which the pairs' harness runs. Both
//! report the test as `module::NAME`. (`cfg(test)` cannot tell the two apart: cargo sets it for
//! `harness = false` targets too.)

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, ItemFn, Lit, MetaNameValue, Token};

/// Marks a test; see the crate's documentation.
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    match expand(args.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

fn expand(args: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let function: ItemFn = syn::parse2(item)?;
    let signature = &function.sig;
    let name = &signature.ident;
    if !signature.inputs.is_empty() || !matches!(signature.output, syn::ReturnType::Default) {
        return Err(syn::Error::new_spanned(
            signature,
            "a test takes no arguments and returns nothing",
        ));
    }
    let options = Punctuated::<MetaNameValue, Token![,]>::parse_terminated.parse2(args)?;
    let inner = format_ident!("__airq_test_{}", name);
    let run = if signature.asyncness.is_some() {
        let mut multi_thread = false;
        let mut worker_threads = None;
        for option in &options {
            let value = match &option.value {
                Expr::Lit(ExprLit { lit, .. }) => lit,
                other => return Err(syn::Error::new_spanned(other, "expected a literal")),
            };
            match (
                option.path.get_ident().map(ToString::to_string).as_deref(),
                value,
            ) {
                (Some("flavor"), Lit::Str(flavor)) => match flavor.value().as_str() {
                    "multi_thread" => multi_thread = true,
                    "current_thread" => multi_thread = false,
                    _ => return Err(syn::Error::new_spanned(flavor, "unknown flavor")),
                },
                (Some("worker_threads"), Lit::Int(count)) => worker_threads = Some(count.clone()),
                _ => {
                    return Err(syn::Error::new_spanned(
                        option,
                        "expected `flavor = \"…\"` or `worker_threads = N`",
                    ))
                }
            }
        }
        let builder = match (multi_thread, worker_threads) {
            (true, Some(count)) => quote!(new_multi_thread().worker_threads(#count)),
            (true, None) => quote!(new_multi_thread()),
            (false, None) => quote!(new_current_thread()),
            (false, Some(count)) => {
                return Err(syn::Error::new_spanned(
                    count,
                    "`worker_threads` needs `flavor = \"multi_thread\"`",
                ))
            }
        };
        quote! {
            || {
                ::tokio::runtime::Builder::#builder
                    .enable_all()
                    .build()
                    .expect("Failed building the Runtime")
                    .block_on(#inner())
            }
        }
    } else {
        if let Some(option) = options.first() {
            return Err(syn::Error::new_spanned(
                option,
                "a test that is not async takes no arguments",
            ));
        }
        quote!(#inner)
    };
    let mut function = function.clone();
    function.sig.ident = inner;
    let registration = format_ident!("__AIRQ_TEST_{}", name.to_string().to_uppercase());
    Ok(quote! {
        #[doc(hidden)]
        #function

        #[::core::prelude::v1::test]
        fn #name() {
            (#run)()
        }

        #[::linkme::distributed_slice(crate::trials::TRIALS)]
        #[doc(hidden)]
        static #registration: crate::trials::Test = crate::trials::Test {
            module: ::core::module_path!(),
            name: ::core::stringify!(#name),
            run: #run,
        };
    })
}
